//! The request's `ProfilesDictionary`: interned strings, attributes, mappings, functions,
//! locations and stacks, each table starting with its empty value at index 0 as OTLP requires.

use std::hash::Hash;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::profiles::v1development::{
    Function, KeyValueAndUnit, Line, Location, Mapping, ProfilesDictionary, Stack,
};

/// An attribute value as interned: strings by content, integers as they are.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
}

/// The tables' hash map: foldhash (SipHash of the strings was most of a conversion's time), with a
/// fixed seed so that requests are the same run after run.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;

/// One table with its index: `intern` returns the index of an equal entry, adding it if new.
struct Table<K, V> {
    index: HashMap<K, i32>,
    rows: Vec<V>,
}

impl<K: Eq + Hash, V: Default> Table<K, V> {
    fn new() -> Self {
        Table {
            index: HashMap::default(),
            rows: vec![V::default()],
        }
    }

    fn intern(&mut self, key: K, make: impl FnOnce() -> V) -> i32 {
        if let Some(i) = self.index.get(&key) {
            return *i;
        }
        let i = i32::try_from(self.rows.len()).unwrap_or(i32::MAX);
        self.rows.push(make());
        self.index.insert(key, i);
        i
    }
}

/// The dictionary under construction.
pub(crate) struct Dictionary {
    strings: Table<String, String>,
    attributes: Table<(i32, Value), KeyValueAndUnit>,
    mappings: Table<(i32, i32), Mapping>,
    functions: Table<(i32, i32), Function>,
    locations: Table<Vec<i32>, Location>,
    stacks: Table<Vec<i32>, Stack>,
}

impl Dictionary {
    pub(crate) fn new() -> Self {
        let mut strings = Table::new();
        strings.index.insert(String::new(), 0);
        Dictionary {
            strings,
            attributes: Table::new(),
            mappings: Table::new(),
            functions: Table::new(),
            locations: Table::new(),
            stacks: Table::new(),
        }
    }

    pub(crate) fn string(&mut self, s: &str) -> i32 {
        if let Some(i) = self.strings.index.get(s) {
            return *i;
        }
        self.strings.intern(s.to_owned(), || s.to_owned())
    }

    pub(crate) fn attribute(&mut self, key: &str, value: Value) -> i32 {
        let key = self.string(key);
        let any = match &value {
            Value::Str(s) => any_value::Value::StringValue(s.clone()),
            Value::Int(i) => any_value::Value::IntValue(*i),
        };
        self.attributes.intern((key, value), || KeyValueAndUnit {
            key_strindex: key,
            value: Some(AnyValue { value: Some(any) }),
            unit_strindex: 0,
        })
    }

    pub(crate) fn str_attribute(&mut self, key: &str, value: &str) -> i32 {
        self.attribute(key, Value::Str(value.to_owned()))
    }

    pub(crate) fn int_attribute(&mut self, key: &str, value: u64) -> i32 {
        self.attribute(key, Value::Int(i64::try_from(value).unwrap_or(i64::MAX)))
    }

    /// One mapping per (file, build-id); the build-id is the mapping's
    /// `process.executable.build_id.gnu` attribute (the eBPF profiler's key).
    pub(crate) fn mapping(&mut self, module: &str, build_id: &str) -> i32 {
        let file = self.string(module);
        let id = self.string(build_id);
        if let Some(i) = self.mappings.index.get(&(file, id)) {
            return *i;
        }
        let attrs = if build_id.is_empty() {
            Vec::new()
        } else {
            vec![self.str_attribute("process.executable.build_id.gnu", build_id)]
        };
        self.mappings.intern((file, id), || Mapping {
            filename_strindex: file,
            attribute_indices: attrs,
            ..Default::default()
        })
    }

    pub(crate) fn function(&mut self, name: &str, file: Option<&str>) -> i32 {
        let name = self.string(name);
        let file = file.map_or(0, |f| self.string(f));
        self.functions.intern((name, file), || Function {
            name_strindex: name,
            system_name_strindex: name,
            filename_strindex: file,
            start_line: 0,
        })
    }

    /// A location: `key` identifies it (mapping, address, lines, attributes, all as indices).
    pub(crate) fn location(
        &mut self,
        mapping: i32,
        address: u64,
        lines: Vec<Line>,
        attrs: Vec<i32>,
    ) -> i32 {
        let mut key = vec![mapping, (address >> 32) as i32, address as i32];
        for l in &lines {
            key.extend([l.function_index, l.line as i32]);
        }
        key.push(-1);
        key.extend(&attrs);
        self.locations.intern(key, || Location {
            mapping_index: mapping,
            address,
            lines,
            attribute_indices: attrs,
        })
    }

    /// A stack of location indices, leaf first.
    pub(crate) fn stack(&mut self, locations: Vec<i32>) -> i32 {
        if locations.is_empty() {
            return 0;
        }
        self.stacks.intern(locations.clone(), || Stack {
            location_indices: locations,
        })
    }

    pub(crate) fn finish(self) -> ProfilesDictionary {
        ProfilesDictionary {
            mapping_table: self.mappings.rows,
            location_table: self.locations.rows,
            function_table: self.functions.rows,
            link_table: vec![Default::default()],
            string_table: self.strings.rows,
            attribute_table: self.attributes.rows,
            stack_table: self.stacks.rows,
        }
    }
}
