"""ns per evaluation of the CEL benchmark expressions with Google's C++ runtime
(PyPI cel-expr-python), printed as JSON. Bindings are built once (an Activation);
each figure is the best of five timed batches. Used by scripts/cel-vs-cpp.sh."""
import json
import sys
import time

from cel_expr_python import cel


def main():
    obj = json.load(open(sys.argv[1]))
    exprs = json.load(open(sys.argv[2]))
    env = cel.NewEnv(variables={"self": cel.Type.DYN})
    activation = env.Activation(data={"self": obj})
    out = {}
    for name, source in exprs:
        expr = env.compile(source, disable_check=True)
        expr.eval(activation=activation)
        n = 1000
        while True:
            start = time.perf_counter_ns()
            for _ in range(n):
                expr.eval(activation=activation)
            if time.perf_counter_ns() - start > 200_000_000:
                break
            n *= 2
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter_ns()
            for _ in range(n):
                expr.eval(activation=activation)
            best = min(best, (time.perf_counter_ns() - start) / n)
        out[name] = best
    print(json.dumps(out))


main()
