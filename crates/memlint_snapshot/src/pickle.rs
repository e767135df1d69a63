//! A streaming reader for Python pickles (protocols 0 to 5).
//!
//! `serde-pickle` builds the whole object graph of a file before handing out the
//! first value, which for a memory snapshot of several gigabytes is several times the
//! file in memory. This reader runs the pickle machine itself and lets a [`Fold`] take
//! the items of chosen lists as they are appended (`APPEND`/`APPENDS`), so that those
//! items are dropped at once: only the containers the fold keeps, and the objects the
//! pickle's memo must keep for later references, stay in memory.
//!
//! Only the data opcodes are supported: a pickle that builds class instances, calls
//! functions or refers to out-of-band buffers is refused with an error (a memory
//! snapshot is plain dicts, lists, tuples, strings and numbers).

use std::cell::{Cell, RefCell};
use std::io::Read;
use std::rc::Rc;

/// A value of the pickle machine. Lists and dicts are shared (the memo and the stack may
/// both refer to one) and mutable (items are appended after the container is memoized).
#[derive(Clone, Debug)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer that does not fit in 64 bits (kept only as a marker).
    BigInt,
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    List(Rc<List>),
    Tuple(Rc<[Value]>),
    Dict(Rc<Dict>),
    /// A set or frozenset (its items are not kept).
    Set,
}

#[derive(Debug, Default)]
pub struct List {
    pub items: RefCell<Vec<Value>>,
    /// Set by [`Fold::list_role`]; items of a list with a role other than 0 go to
    /// [`Fold::item`] and are not stored.
    pub role: Cell<u32>,
    /// How many items were appended, stored or folded.
    pub appended: Cell<usize>,
}

#[derive(Debug, Default)]
pub struct Dict {
    pub items: RefCell<Vec<(Value, Value)>>,
    pub role: Cell<u32>,
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }
    /// The value under a string key of a dict.
    pub fn get(&self, key: &str) -> Option<Value> {
        match self {
            Value::Dict(d) => d.items.borrow().iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v.clone()),
            _ => None,
        }
    }
    /// The items of a list or tuple.
    pub fn items(&self) -> Vec<Value> {
        match self {
            Value::List(l) => l.items.borrow().clone(),
            Value::Tuple(t) => t.to_vec(),
            _ => Vec::new(),
        }
    }
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::BigInt => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Set => "set",
        }
    }
}

/// What the reader calls as it goes.
pub trait Fold {
    /// A list was created. `parent` is the container it is being added to (the object below
    /// the innermost mark), `key` the dict key it will be stored under (when the parent is a
    /// dict) and `index` its position when the parent is a list. Return a non-zero role to
    /// have its items passed to [`Fold::item`] instead of stored.
    fn list_role(&mut self, parent: Option<&Value>, key: Option<&str>, index: usize) -> u32;
    /// An item appended to a list whose role is not 0 (see [`Fold::list_role`]); the dict
    /// that is the outermost value of the pickle has role 1 (its `role` field).
    fn item(&mut self, role: u32, index: usize, item: Value) -> Result<(), String>;
}

#[derive(Debug, thiserror::Error)]
pub enum PickleError {
    #[error("the file ends in the middle of the pickle (truncated?) at byte {0}")]
    Truncated(u64),
    #[error("unknown opcode 0x{op:02x} at byte {at}")]
    UnknownOpcode { op: u8, at: u64 },
    #[error("unsupported pickle opcode {name} at byte {at}: a memory snapshot holds only plain data")]
    Unsupported { name: &'static str, at: u64 },
    #[error("malformed pickle at byte {at}: {what}")]
    Malformed { what: String, at: u64 },
    #[error("{0}")]
    Fold(String),
    /// The stream does not start with a pickle header (protocol 2 and later) and fails as
    /// a protocol 0/1 pickle.
    #[error("{0}")]
    NoHeader(Box<PickleError>),
    #[error("cannot read the file: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads bytes with a position, through a buffer of our own (the pickle machine reads one
/// byte at a time).
struct Input<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    offset: u64,
}

impl<R: Read> Input<R> {
    fn new(inner: R) -> Self {
        Input { inner, buf: vec![0; 1 << 20], pos: 0, len: 0, offset: 0 }
    }
    fn at(&self) -> u64 {
        self.offset + self.pos as u64
    }
    #[inline]
    fn fill(&mut self) -> Result<bool, PickleError> {
        if self.pos < self.len {
            return Ok(true);
        }
        self.offset += self.len as u64;
        self.pos = 0;
        self.len = 0;
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(n) => {
                    self.len = n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
    #[inline]
    fn byte(&mut self) -> Result<u8, PickleError> {
        if self.pos < self.len {
            let b = self.buf[self.pos];
            self.pos += 1;
            return Ok(b);
        }
        if !self.fill()? {
            return Err(PickleError::Truncated(self.at()));
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(b)
    }
    fn bytes(&mut self, n: u64, out: &mut Vec<u8>) -> Result<(), PickleError> {
        out.clear();
        let mut left = n;
        while left > 0 {
            if !self.fill()? {
                return Err(PickleError::Truncated(self.at()));
            }
            let take = left.min((self.len - self.pos) as u64) as usize;
            out.extend_from_slice(&self.buf[self.pos..self.pos + take]);
            self.pos += take;
            left -= take as u64;
        }
        Ok(())
    }
    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        let mut a = [0u8; N];
        for b in a.iter_mut() {
            *b = self.byte()?;
        }
        Ok(a)
    }
    fn line(&mut self, out: &mut Vec<u8>) -> Result<(), PickleError> {
        out.clear();
        loop {
            let b = self.byte()?;
            if b == b'\n' {
                return Ok(());
            }
            out.push(b);
        }
    }
}

enum Slot {
    /// Memoized but folded away (its items went to the fold): a later reference is an error.
    Folded,
    Val(Value),
}

/// Runs the pickle in `input` to its STOP and returns the top value (with folded lists
/// left empty).
pub fn read<R: Read, F: Fold>(input: R, fold: &mut F) -> Result<Value, PickleError> {
    let mut m = Machine { input: Input::new(input), stack: Vec::with_capacity(256), marks: Vec::new(), memo: Vec::new(), scratch: Vec::new(), header: false };
    match m.run(fold) {
        Err(e @ PickleError::Io(_)) => Err(e),
        Err(PickleError::Truncated(0)) => Err(PickleError::NoHeader(Box::new(PickleError::Malformed { what: "the file is empty".into(), at: 0 }))),
        Err(e) if !m.header => Err(PickleError::NoHeader(Box::new(e))),
        other => other,
    }
}

struct Machine<R> {
    input: Input<R>,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: Vec<Option<Slot>>,
    scratch: Vec<u8>,
    /// Whether the stream started with a PROTO opcode.
    header: bool,
}

impl<R: Read> Machine<R> {
    fn malformed(&self, what: impl Into<String>) -> PickleError {
        PickleError::Malformed { what: what.into(), at: self.input.at() }
    }
    fn pop(&mut self) -> Result<Value, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.malformed("stack underflow"));
        }
        Ok(self.stack.pop().unwrap())
    }
    fn pop_mark(&mut self) -> Result<Vec<Value>, PickleError> {
        let m = self.marks.pop().ok_or_else(|| self.malformed("no mark on the stack"))?;
        Ok(self.stack.split_off(m))
    }
    fn top(&self) -> Result<&Value, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.malformed("stack underflow"));
        }
        Ok(self.stack.last().unwrap())
    }
    fn memo_put(&mut self, id: usize) -> Result<(), PickleError> {
        let v = self.top()?.clone();
        let slot = match &v {
            Value::List(l) if l.role.get() != 0 => Slot::Folded,
            _ => Slot::Val(v),
        };
        if id >= self.memo.len() {
            if id > self.memo.len() + (1 << 24) {
                return Err(self.malformed(format!("memo index {id} out of range")));
            }
            self.memo.resize_with(id + 1, || None);
        }
        self.memo[id] = Some(slot);
        Ok(())
    }
    fn memo_get(&mut self, id: usize) -> Result<(), PickleError> {
        match self.memo.get(id) {
            Some(Some(Slot::Val(v))) => {
                let v = v.clone();
                self.stack.push(v);
                Ok(())
            }
            Some(Some(Slot::Folded)) => Err(self.malformed(format!("reference to memo {id}, a list read as a stream"))),
            _ => Err(self.malformed(format!("reference to memo {id}, which was never stored"))),
        }
    }
    /// Pushes a new list, asking the fold for its role given where it is being built.
    fn push_list(&mut self, items: Vec<Value>, fold: &mut impl Fold) {
        let (role, _) = self.role_here(fold);
        let list = List { items: RefCell::new(Vec::new()), role: Cell::new(role), appended: Cell::new(0) };
        let list = Value::List(Rc::new(list));
        self.stack.push(list);
        if !items.is_empty() {
            // LIST with items (protocol 0): these go through the same path as APPENDS.
            let _ = self.append_items(self.stack.len() - 1, items, fold);
        }
    }
    /// Pushes a new dict; the dict that is the pickle's outermost value gets role 1.
    fn push_dict(&mut self) {
        let d = Dict::default();
        if self.stack.is_empty() && self.marks.is_empty() {
            d.role.set(1);
        }
        self.stack.push(Value::Dict(Rc::new(d)));
    }
    /// Where a list being created will go: the container below the innermost mark
    /// (batched APPENDS/SETITEMS) or the list right below it (a single APPEND).
    fn role_here(&self, fold: &mut impl Fold) -> (u32, ()) {
        let m = self.marks.last().copied().unwrap_or(0);
        let since = self.stack.len() - m;
        let below_mark = if m > 0 { self.stack.get(m - 1) } else { None };
        let last = if since > 0 { self.stack.last() } else { None };
        let role = match (below_mark, last) {
            (Some(p @ Value::List(l)), _) if !self.marks.is_empty() => fold.list_role(Some(p), None, l.appended.get() + since),
            (Some(p @ Value::Dict(_)), Some(Value::Str(k))) if since % 2 == 1 => fold.list_role(Some(p), Some(k), 0),
            (_, Some(p @ Value::List(l))) => fold.list_role(Some(p), None, l.appended.get()),
            (_, Some(Value::Str(k))) if self.stack.len() >= 2 && matches!(self.stack[self.stack.len() - 2], Value::Dict(_)) => {
                fold.list_role(Some(&self.stack[self.stack.len() - 2]), Some(k), 0)
            }
            _ => fold.list_role(None, None, 0),
        };
        (role, ())
    }
    fn append_items(&mut self, list_at: usize, items: Vec<Value>, fold: &mut impl Fold) -> Result<(), PickleError> {
        let Some(Value::List(list)) = self.stack.get(list_at) else {
            return Err(self.malformed(format!(
                "APPENDS to a {}",
                self.stack.get(list_at).map(Value::type_name).unwrap_or("nothing")
            )));
        };
        let list = list.clone();
        let role = list.role.get();
        if role == 0 {
            let n = items.len();
            list.items.borrow_mut().extend(items);
            list.appended.set(list.appended.get() + n);
        } else {
            for item in items {
                let i = list.appended.get();
                list.appended.set(i + 1);
                fold.item(role, i, item).map_err(PickleError::Fold)?;
            }
        }
        Ok(())
    }
    fn set_items(&mut self, dict_at: usize, items: Vec<Value>) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return Err(self.malformed("SETITEMS with an odd number of items"));
        }
        let Some(Value::Dict(d)) = self.stack.get(dict_at) else {
            return Err(self.malformed("SETITEM(S) on something that is not a dict"));
        };
        let mut it = items.into_iter();
        let mut map = d.items.borrow_mut();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            map.push((k, v));
        }
        Ok(())
    }
    fn string(&mut self, n: u64) -> Result<Value, PickleError> {
        if n > (1 << 40) {
            return Err(self.malformed(format!("a string of {n} bytes")));
        }
        let mut s = std::mem::take(&mut self.scratch);
        self.input.bytes(n, &mut s)?;
        let v = match std::str::from_utf8(&s) {
            Ok(t) => Value::Str(Rc::from(t)),
            Err(_) => return Err(self.malformed("a string that is not UTF-8")),
        };
        self.scratch = s;
        Ok(v)
    }
    fn byte_string(&mut self, n: u64) -> Result<Value, PickleError> {
        if n > (1 << 40) {
            return Err(self.malformed(format!("bytes of length {n}")));
        }
        let mut s = std::mem::take(&mut self.scratch);
        self.input.bytes(n, &mut s)?;
        let v = Value::Bytes(Rc::from(&s[..]));
        self.scratch = s;
        Ok(v)
    }
    fn long(&mut self, n: u64) -> Result<Value, PickleError> {
        if n > (1 << 32) {
            return Err(self.malformed(format!("an integer of {n} bytes")));
        }
        let mut s = std::mem::take(&mut self.scratch);
        self.input.bytes(n, &mut s)?;
        let v = if s.is_empty() {
            Value::Int(0)
        } else if s.len() <= 8 {
            let neg = s[s.len() - 1] & 0x80 != 0;
            let mut a = if neg { [0xffu8; 8] } else { [0u8; 8] };
            a[..s.len()].copy_from_slice(&s);
            Value::Int(i64::from_le_bytes(a))
        } else {
            Value::BigInt
        };
        self.scratch = s;
        Ok(v)
    }
    fn text_line(&mut self) -> Result<String, PickleError> {
        let mut s = std::mem::take(&mut self.scratch);
        self.input.line(&mut s)?;
        let t = String::from_utf8_lossy(&s).trim_end_matches('\r').to_string();
        self.scratch = s;
        Ok(t)
    }

    fn run(&mut self, fold: &mut impl Fold) -> Result<Value, PickleError> {
        loop {
            let at = self.input.at();
            let op = self.input.byte()?;
            match op {
                0x80 => {
                    self.header |= at == 0;
                    let p = self.input.byte()?;
                    if p > 5 {
                        return Err(self.malformed(format!("pickle protocol {p} (this reader knows 0 to 5)")));
                    }
                }
                0x95 => {
                    self.input.fixed::<8>()?;
                } // FRAME: framing is only a hint
                b'.' => {
                    // STOP
                    let v = self.pop()?;
                    return Ok(v);
                }
                b'(' => self.marks.push(self.stack.len()),
                b'0' => {
                    if self.stack.len() > self.marks.last().copied().unwrap_or(0) {
                        self.pop()?;
                    } else {
                        self.pop_mark()?;
                    }
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top()?.clone();
                    self.stack.push(v);
                }
                // memo
                b'p' => {
                    let l = self.text_line()?;
                    let id = l.parse::<usize>().map_err(|_| self.malformed("bad PUT index"))?;
                    self.memo_put(id)?;
                }
                b'q' => {
                    let id = self.input.byte()? as usize;
                    self.memo_put(id)?;
                }
                b'r' => {
                    let id = u32::from_le_bytes(self.input.fixed::<4>()?) as usize;
                    self.memo_put(id)?;
                }
                0x94 => {
                    let id = self.memo.len();
                    self.memo_put(id)?;
                }
                b'g' => {
                    let l = self.text_line()?;
                    let id = l.parse::<usize>().map_err(|_| self.malformed("bad GET index"))?;
                    self.memo_get(id)?;
                }
                b'h' => {
                    let id = self.input.byte()? as usize;
                    self.memo_get(id)?;
                }
                b'j' => {
                    let id = u32::from_le_bytes(self.input.fixed::<4>()?) as usize;
                    self.memo_get(id)?;
                }
                // constants and numbers
                b'N' => self.stack.push(Value::None),
                0x88 => self.stack.push(Value::Bool(true)),
                0x89 => self.stack.push(Value::Bool(false)),
                b'I' => {
                    let l = self.text_line()?;
                    let v = match l.as_str() {
                        "00" => Value::Bool(false),
                        "01" => Value::Bool(true),
                        s => Value::Int(s.parse().map_err(|_| self.malformed("bad INT"))?),
                    };
                    self.stack.push(v);
                }
                b'J' => {
                    let v = i32::from_le_bytes(self.input.fixed::<4>()?);
                    self.stack.push(Value::Int(v as i64));
                }
                b'K' => {
                    let v = self.input.byte()?;
                    self.stack.push(Value::Int(v as i64));
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.input.fixed::<2>()?);
                    self.stack.push(Value::Int(v as i64));
                }
                b'L' => {
                    let l = self.text_line()?;
                    let t = l.trim_end_matches('L');
                    self.stack.push(t.parse::<i64>().map(Value::Int).unwrap_or(Value::BigInt));
                }
                0x8a => {
                    let n = self.input.byte()? as u64;
                    let v = self.long(n)?;
                    self.stack.push(v);
                }
                0x8b => {
                    let n = i32::from_le_bytes(self.input.fixed::<4>()?);
                    if n < 0 {
                        return Err(self.malformed("LONG4 with a negative length"));
                    }
                    let v = self.long(n as u64)?;
                    self.stack.push(v);
                }
                b'F' => {
                    let l = self.text_line()?;
                    let f = l.parse::<f64>().map_err(|_| self.malformed("bad FLOAT"))?;
                    self.stack.push(Value::Float(f));
                }
                b'G' => {
                    let f = f64::from_be_bytes(self.input.fixed::<8>()?);
                    self.stack.push(Value::Float(f));
                }
                // strings
                b'S' => {
                    let l = self.text_line()?;
                    let t = l.trim();
                    let t = t.strip_prefix(['\'', '"']).and_then(|t| t.strip_suffix(['\'', '"'])).unwrap_or(t);
                    self.stack.push(Value::Str(Rc::from(t)));
                }
                b'V' => {
                    let l = self.text_line()?;
                    self.stack.push(Value::Str(Rc::from(l.as_str())));
                }
                b'T' | b'X' => {
                    let n = u32::from_le_bytes(self.input.fixed::<4>()?) as u64;
                    let v = if op == b'X' { self.string(n)? } else { self.byte_string(n)? };
                    self.stack.push(v);
                }
                b'U' | 0x8c => {
                    let n = self.input.byte()? as u64;
                    let v = if op == 0x8c { self.string(n)? } else { self.byte_string(n)? };
                    self.stack.push(v);
                }
                0x8d => {
                    let n = u64::from_le_bytes(self.input.fixed::<8>()?);
                    let v = self.string(n)?;
                    self.stack.push(v);
                }
                b'B' => {
                    let n = u32::from_le_bytes(self.input.fixed::<4>()?) as u64;
                    let v = self.byte_string(n)?;
                    self.stack.push(v);
                }
                b'C' => {
                    let n = self.input.byte()? as u64;
                    let v = self.byte_string(n)?;
                    self.stack.push(v);
                }
                0x8e | 0x96 => {
                    let n = u64::from_le_bytes(self.input.fixed::<8>()?);
                    let v = self.byte_string(n)?;
                    self.stack.push(v);
                }
                // containers
                b']' => self.push_list(Vec::new(), fold),
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push_list(items, fold);
                }
                b'}' => self.push_dict(),
                b'd' => {
                    let items = self.pop_mark()?;
                    self.push_dict();
                    let at = self.stack.len() - 1;
                    self.set_items(at, items)?;
                }
                b')' => self.stack.push(Value::Tuple(Rc::from(Vec::new()))),
                b't' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Value::Tuple(Rc::from(items)));
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + n {
                        return Err(self.malformed("stack underflow in TUPLE"));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.stack.push(Value::Tuple(Rc::from(items)));
                }
                0x8f => self.stack.push(Value::Set),
                0x90 => {
                    self.pop_mark()?;
                }
                0x91 => {
                    self.pop_mark()?;
                    self.stack.push(Value::Set);
                }
                b'a' => {
                    let v = self.pop()?;
                    let at = self.stack.len().checked_sub(1).ok_or_else(|| self.malformed("APPEND to nothing"))?;
                    self.append_items(at, vec![v], fold)?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    let at = self.stack.len().checked_sub(1).ok_or_else(|| self.malformed("APPENDS to nothing"))?;
                    self.append_items(at, items, fold)?;
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let at = self.stack.len().checked_sub(1).ok_or_else(|| self.malformed("SETITEM to nothing"))?;
                    self.set_items(at, vec![k, v])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    let at = self.stack.len().checked_sub(1).ok_or_else(|| self.malformed("SETITEMS to nothing"))?;
                    self.set_items(at, items)?;
                }
                0x97 => return Err(PickleError::Unsupported { name: "NEXT_BUFFER", at }),
                0x98 => return Err(PickleError::Unsupported { name: "READONLY_BUFFER", at }),
                b'c' | 0x93 => return Err(PickleError::Unsupported { name: "GLOBAL", at }),
                b'R' => return Err(PickleError::Unsupported { name: "REDUCE", at }),
                b'b' => return Err(PickleError::Unsupported { name: "BUILD", at }),
                b'i' | b'o' | 0x81 | 0x92 => return Err(PickleError::Unsupported { name: "an object constructor", at }),
                b'P' | b'Q' => return Err(PickleError::Unsupported { name: "PERSID", at }),
                0x82..=0x84 => return Err(PickleError::Unsupported { name: "EXT", at }),
                _ => return Err(PickleError::UnknownOpcode { op, at }),
            }
        }
    }
}
