//! A compact, exact binary form of a JSON value, for holding many rendered objects.
//!
//! A `serde_json::Value` map is a B-tree whose every node has room for eleven entries, so a
//! rendered Kubernetes object of about 1 KB of YAML takes 10-20 KB of heap. `render` holds
//! every rendered object until the merge is done; in this form they take about their text's
//! size. The encoding is private and round-trips exactly (numbers keep their kind and bits).

use serde_json::{Map, Number, Value};

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const UNSIGNED: u8 = 3;
const SIGNED: u8 = 4;
const FLOAT: u8 = 5;
const STRING: u8 = 6;
const ARRAY: u8 = 7;
const OBJECT: u8 = 8;

/// `value` encoded.
pub(super) fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put(value, &mut out);
    out.shrink_to_fit();
    out
}

fn put_len(mut n: usize, out: &mut Vec<u8>) {
    loop {
        // The low seven bits, then a continuation flag.
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn put_str(s: &str, out: &mut Vec<u8>) {
    put_len(s.len(), out);
    out.extend_from_slice(s.as_bytes());
}

fn put(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                out.push(UNSIGNED);
                out.extend_from_slice(&u.to_le_bytes());
            } else if let Some(i) = n.as_i64() {
                out.push(SIGNED);
                out.extend_from_slice(&i.to_le_bytes());
            } else {
                out.push(FLOAT);
                out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_bits().to_le_bytes());
            }
        }
        Value::String(s) => {
            out.push(STRING);
            put_str(s, out);
        }
        Value::Array(items) => {
            out.push(ARRAY);
            put_len(items.len(), out);
            for item in items {
                put(item, out);
            }
        }
        Value::Object(map) => {
            out.push(OBJECT);
            put_len(map.len(), out);
            for (key, item) in map {
                put_str(key, out);
                put(item, out);
            }
        }
    }
}

/// The value `bytes` encode; `None` for bytes [`encode`] did not write.
pub(super) fn decode(bytes: &[u8]) -> Option<Value> {
    let mut reader = Reader { bytes, pos: 0 };
    let value = reader.value()?;
    (reader.pos == bytes.len()).then_some(value)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.pos.checked_add(n)?;
        let slice = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(slice)
    }

    fn eight(&mut self) -> Option<[u8; 8]> {
        self.take(8)?.try_into().ok()
    }

    fn len(&mut self) -> Option<usize> {
        let mut n: usize = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= usize::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    fn string(&mut self) -> Option<String> {
        let n = self.len()?;
        std::str::from_utf8(self.take(n)?).ok().map(str::to_owned)
    }

    fn value(&mut self) -> Option<Value> {
        Some(match self.byte()? {
            NULL => Value::Null,
            FALSE => Value::Bool(false),
            TRUE => Value::Bool(true),
            UNSIGNED => Value::from(u64::from_le_bytes(self.eight()?)),
            SIGNED => Value::from(i64::from_le_bytes(self.eight()?)),
            FLOAT => Value::Number(Number::from_f64(f64::from_bits(u64::from_le_bytes(
                self.eight()?,
            )))?),
            STRING => Value::String(self.string()?),
            ARRAY => {
                let n = self.len()?;
                let mut items = Vec::with_capacity(n.min(self.bytes.len()));
                for _ in 0..n {
                    items.push(self.value()?);
                }
                Value::Array(items)
            }
            OBJECT => {
                let n = self.len()?;
                let mut map = Map::new();
                for _ in 0..n {
                    let key = self.string()?;
                    let item = self.value()?;
                    map.insert(key, item);
                }
                Value::Object(map)
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_exactly() {
        for value in [
            json!(null),
            json!({"a": [1, -2, 1.5, 0.1, 1e300, u64::MAX, i64::MIN, true, false, null],
                   "b": {"": "", "ü": "x\u{0}y", "long": "z".repeat(300)},
                   "c": [], "d": {}}),
            json!("plain"),
            json!(-0.0),
        ] {
            let bytes = encode(&value);
            let back = decode(&bytes).unwrap();
            assert_eq!(back, value);
            assert_eq!(back.to_string(), value.to_string());
        }
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[OBJECT, 1]), None);
        assert_eq!(decode(&[NULL, NULL]), None);
    }
}
