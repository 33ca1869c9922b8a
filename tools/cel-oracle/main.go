// Command cel-oracle evaluates CEL expressions with Kubernetes' own CEL environment, for
// Switchyard's differential test (engine/cel/tests/differential.rs).
//
// It reads JSON lines from stdin, each {"expr": "...", "bindings": {"name": <json>}}, and
// writes one JSON line per input: {"result": <json>} or {"error": "...", "phase": "compile" |
// "check" | "program" | "eval" | "result"}. The environment is the API server's base environment
// (k8s.io/apiserver/pkg/cel/environment) at compatibility version 1.34, with strict cost, the
// type checker on and the per-call cost limit; every binding is a dyn variable. JSON integers
// are CEL ints, other JSON numbers doubles.
//
// Results are written as `switchyard cel` prints them: maps as objects (keys as strings),
// bytes as standard base64, durations and timestamps as their CEL strings (a timestamp at the
// offset it was written with, as cel-go's own JSON conversion writes it), doubles always
// with a fraction or an exponent (so 1.0 and 1 stay apart), NaN and infinities as strings,
// optionals as their value (none as null), Kubernetes library values as their strings, and
// type values as their names.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

type request struct {
	Expr     string                     `json:"expr"`
	Bindings map[string]json.RawMessage `json:"bindings"`
}

type response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Phase  string          `json:"phase,omitempty"`
	// Cost is the evaluation's actual cost, when it ran (to compare Switchyard's meter with).
	Cost *uint64 `json:"cost,omitempty"`
}

// envs caches one environment per set of variable names.
var envs = map[string]*cel.Env{}

func envFor(base *cel.Env, names []string) (*cel.Env, error) {
	key := strings.Join(names, "\x00")
	if env, ok := envs[key]; ok {
		return env, nil
	}
	opts := make([]cel.EnvOption, 0, len(names))
	for _, name := range names {
		opts = append(opts, cel.Variable(name, cel.DynType))
	}
	env, err := base.Extend(opts...)
	if err != nil {
		return nil, err
	}
	envs[key] = env
	return env, nil
}

func main() {
	// The API server's base environment, as for a v1.34 server whose compatibility version
	// is 1.34 (every library of the release), with strict cost.
	base := environment.MustBaseEnvSet(version.MajorMinor(1, 34), true).NewExpressionsEnv()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		line := bytes.TrimSpace(in.Bytes())
		if len(line) == 0 {
			continue
		}
		resp := handle(base, line)
		encoded, err := json.Marshal(resp)
		if err != nil {
			encoded = []byte(`{"error":"cannot encode the response","phase":"result"}`)
		}
		out.Write(encoded)
		out.WriteByte('\n')
		out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "cel-oracle: reading stdin:", err)
		os.Exit(1)
	}
}

func handle(base *cel.Env, line []byte) (resp response) {
	defer func() {
		if r := recover(); r != nil {
			resp = response{Error: fmt.Sprintf("panic: %v", r), Phase: "eval"}
		}
	}()
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return response{Error: "bad request: " + err.Error(), Phase: "request"}
	}
	names := make([]string, 0, len(req.Bindings))
	vars := make(map[string]any, len(req.Bindings))
	for name, raw := range req.Bindings {
		names = append(names, name)
		value, err := decodeJSON(raw)
		if err != nil {
			return response{Error: "bad binding " + name + ": " + err.Error(), Phase: "request"}
		}
		vars[name] = sortedAdapter{}.NativeToValue(value)
	}
	sort.Strings(names)
	env, err := envFor(base, names)
	if err != nil {
		return response{Error: err.Error(), Phase: "request"}
	}
	parsed, iss := env.Parse(req.Expr)
	if iss.Err() != nil {
		return response{Error: iss.Err().Error(), Phase: "compile"}
	}
	checked, iss := env.Check(parsed)
	if iss.Err() != nil {
		return response{Error: iss.Err().Error(), Phase: "check"}
	}
	prg, err := env.Program(checked)
	if err != nil {
		// cel-go plans the program here, evaluating constant calls (OptOptimize).
		return response{Error: err.Error(), Phase: "program"}
	}
	val, details, err := prg.Eval(vars)
	var cost *uint64
	if details != nil {
		cost = details.ActualCost()
	}
	if err != nil {
		return response{Error: err.Error(), Phase: "eval", Cost: cost}
	}
	var buf bytes.Buffer
	if err := writeValue(&buf, val); err != nil {
		return response{Error: err.Error(), Phase: "result", Cost: cost}
	}
	return response{Result: buf.Bytes(), Cost: cost}
}

// decodeJSON decodes a binding: JSON integers as int64, other numbers as float64.
func decodeJSON(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return convertNumbers(v), nil
}

func convertNumbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(t.String(), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(t.String(), 64)
		return f
	case map[string]any:
		for k, e := range t {
			t[k] = convertNumbers(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = convertNumbers(e)
		}
		return t
	default:
		return v
	}
}

// sortedAdapter makes CEL values of decoded JSON whose maps iterate in key order, as
// Switchyard's do: Go maps iterate in random order, and Kubernetes leaves the order of an
// object's keys unspecified, so the comparison needs one order.
type sortedAdapter struct{}

func (a sortedAdapter) NativeToValue(value any) ref.Val {
	switch v := value.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return sortedMap{Mapper: types.NewStringInterfaceMap(a, v), keys: keys}
	case []any:
		return types.NewDynamicList(a, v)
	default:
		return types.DefaultTypeAdapter.NativeToValue(value)
	}
}

// sortedMap is a map of JSON that iterates in key order.
type sortedMap struct {
	traits.Mapper
	keys []string
}

func (m sortedMap) Iterator() traits.Iterator {
	return types.NewStringList(types.DefaultTypeAdapter, m.keys).Iterator()
}

func writeString(buf *bytes.Buffer, s string) error {
	encoded, err := json.Marshal(s)
	if err != nil {
		return err
	}
	buf.Write(encoded)
	return nil
}

func formatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return `"NaN"`
	case math.IsInf(f, 1):
		return `"Infinity"`
	case math.IsInf(f, -1):
		return `"-Infinity"`
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// formatDuration is CEL's string(duration): seconds, a trimmed fraction, "s".
func formatDuration(d time.Duration) string {
	sign := ""
	n := int64(d)
	u := uint64(n)
	if n < 0 {
		sign = "-"
		u = uint64(-(n + 1)) + 1
	}
	secs, nanos := u/1e9, u%1e9
	if nanos == 0 {
		return fmt.Sprintf("%s%ds", sign, secs)
	}
	frac := strings.TrimRight(fmt.Sprintf("%09d", nanos), "0")
	return fmt.Sprintf("%s%d.%ss", sign, secs, frac)
}

func writeValue(buf *bytes.Buffer, val ref.Val) error {
	switch v := val.(type) {
	case types.Null:
		buf.WriteString("null")
	case types.Bool:
		buf.WriteString(strconv.FormatBool(bool(v)))
	case types.Int:
		buf.WriteString(strconv.FormatInt(int64(v), 10))
	case types.Uint:
		buf.WriteString(strconv.FormatUint(uint64(v), 10))
	case types.Double:
		buf.WriteString(formatDouble(float64(v)))
	case types.String:
		return writeString(buf, string(v))
	case types.Bytes:
		return writeString(buf, base64.StdEncoding.EncodeToString([]byte(v)))
	case types.Duration:
		return writeString(buf, formatDuration(v.Duration))
	case types.Timestamp:
		return writeString(buf, v.Time.Format(time.RFC3339Nano))
	case *types.Type:
		return writeString(buf, v.TypeName())
	case *types.Optional:
		if !v.HasValue() {
			buf.WriteString("null")
			return nil
		}
		return writeValue(buf, v.GetValue())
	case apiservercel.Quantity:
		return writeString(buf, v.Quantity.String())
	case *apiservercel.Quantity:
		return writeString(buf, v.Quantity.String())
	case apiservercel.URL:
		return writeString(buf, v.URL.String())
	case *apiservercel.URL:
		return writeString(buf, v.URL.String())
	case apiservercel.IP:
		return writeString(buf, v.Addr.String())
	case *apiservercel.IP:
		return writeString(buf, v.Addr.String())
	case apiservercel.CIDR:
		return writeString(buf, v.Prefix.String())
	case *apiservercel.CIDR:
		return writeString(buf, v.Prefix.String())
	case apiservercel.Semver:
		return writeString(buf, v.Version.String())
	case *apiservercel.Semver:
		return writeString(buf, v.Version.String())
	case traits.Mapper:
		return writeMap(buf, v)
	case traits.Lister:
		buf.WriteByte('[')
		it := v.Iterator()
		first := true
		for it.HasNext() == types.True {
			if !first {
				buf.WriteByte(',')
			}
			first = false
			if err := writeValue(buf, it.Next()); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		return fmt.Errorf("a value of type %s has no JSON form", val.Type().TypeName())
	}
	return nil
}

func writeMap(buf *bytes.Buffer, m traits.Mapper) error {
	type entry struct {
		key string
		val ref.Val
	}
	var entries []entry
	it := m.Iterator()
	for it.HasNext() == types.True {
		k := it.Next()
		var key string
		switch kv := k.(type) {
		case types.String:
			key = string(kv)
		case types.Int:
			key = strconv.FormatInt(int64(kv), 10)
		case types.Uint:
			key = strconv.FormatUint(uint64(kv), 10)
		case types.Bool:
			key = strconv.FormatBool(bool(kv))
		default:
			return fmt.Errorf("a map key of type %s has no JSON form", k.Type().TypeName())
		}
		entries = append(entries, entry{key, m.Get(k)})
	}
	buf.WriteByte('{')
	for i, e := range entries {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeString(buf, e.key); err != nil {
			return err
		}
		buf.WriteByte(':')
		if err := writeValue(buf, e.val); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}
