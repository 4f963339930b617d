//! Reading a [`WorkloadConfig`] so that every error names the key at fault.
//!
//! serde's derived internally tagged enums buffer the table before choosing the variant,
//! and errors from the buffered fields lose the key: `scale = "high"` reports only
//! "invalid type: string, expected f64". Here the table is read into values first, the
//! `kind` picks the configuration struct, and each field is deserialized with its key
//! attached to any error: "web: `scale`: invalid type: string "high", expected f64".

use serde::de::value::{Error as ValueError, MapDeserializer};
use serde::de::{Error as _, IntoDeserializer, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::workload::{BulkConfig, FetchLoopConfig, UdpCbrConfig, WebConfig, WorkloadConfig};

/// The values `kind` may take.
const KINDS: &[&str] = &["web", "bulk", "udp-cbr", "fetch-loop"];

impl<'de> Deserialize<'de> for WorkloadConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut table = Map::<String, Value>::deserialize(deserializer)?;
        let kind = match table.remove("kind") {
            Some(Value::String(kind)) => kind,
            Some(other) => {
                return Err(D::Error::custom(format_args!(
                    "`kind` must be one of \"web\", \"bulk\", \"udp-cbr\", \"fetch-loop\", found {other}"
                )))
            }
            None => {
                return Err(D::Error::custom(
                    "missing `kind`: one of \"web\", \"bulk\", \"udp-cbr\", \"fetch-loop\"",
                ))
            }
        };
        let fields = Fields(table);
        let config = match kind.as_str() {
            "web" => WebConfig::deserialize(fields).map(WorkloadConfig::Web),
            "bulk" => BulkConfig::deserialize(fields).map(WorkloadConfig::Bulk),
            "udp-cbr" => UdpCbrConfig::deserialize(fields).map(WorkloadConfig::UdpCbr),
            "fetch-loop" => FetchLoopConfig::deserialize(fields).map(WorkloadConfig::FetchLoop),
            other => return Err(D::Error::unknown_variant(other, KINDS)),
        };
        config.map_err(|e| D::Error::custom(format_args!("{kind}: {e}")))
    }
}

/// A table's fields, deserialized as a map whose values carry their keys.
struct Fields(Map<String, Value>);

impl<'de> Deserializer<'de> for Fields {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        let entries = self.0.into_iter().map(|(key, value)| {
            let keyed = Keyed {
                key: key.clone(),
                value,
            };
            (key, keyed)
        });
        visitor.visit_map(MapDeserializer::new(entries))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// One field's value; errors from it are prefixed with the key.
struct Keyed {
    key: String,
    value: Value,
}

impl<'de> IntoDeserializer<'de, ValueError> for Keyed {
    type Deserializer = Keyed;

    fn into_deserializer(self) -> Keyed {
        self
    }
}

macro_rules! keyed {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, ValueError> {
                let key = self.key;
                self.value
                    .$method($($arg,)* visitor)
                    .map_err(|e| ValueError::custom(format_args!("`{key}`: {e}")))
            }
        )*
    };
}

impl<'de> Deserializer<'de> for Keyed {
    type Error = ValueError;

    keyed! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
        deserialize_ignored_any();
    }
}
