//! The bytes a partition key is hashed from.
//!
//! A single-column key is the column's serialized value as is. A composite key
//! (several partition-key columns) is, for each component in key order: a
//! 2-byte big-endian length, the component's bytes, and a zero byte
//! (Cassandra's `CompositeType` encoding).

use crate::error::EncodeError;

/// Builds the hashed bytes of a partition key in a reusable buffer.
///
/// ```
/// use scylla_driver_cql::token::PartitionKeyBuilder;
/// let mut b = PartitionKeyBuilder::new();
/// b.push(&7i32.to_be_bytes()).unwrap();
/// assert_eq!(b.finish(), &7i32.to_be_bytes()[..]);
///
/// b.clear();
/// b.push(b"a").unwrap();
/// b.push(b"bc").unwrap();
/// assert_eq!(b.finish(), &[0, 1, b'a', 0, 0, 2, b'b', b'c', 0][..]);
/// ```
#[derive(Debug, Default, Clone)]
pub struct PartitionKeyBuilder {
    buf: Vec<u8>,
    components: usize,
    /// End of the first component's bytes in `buf` (stored composite-style).
    first_len: usize,
}

impl PartitionKeyBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every component, keeping the buffer's capacity.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.components = 0;
        self.first_len = 0;
    }

    /// Appends the next component of the key (its serialized value).
    pub fn push(&mut self, component: &[u8]) -> Result<(), EncodeError> {
        let len = u16::try_from(component.len()).map_err(|_| EncodeError::TooLong {
            what: "partition key component",
            length: component.len(),
            max: u16::MAX as usize,
        })?;
        self.buf.extend_from_slice(&len.to_be_bytes());
        self.buf.extend_from_slice(component);
        self.buf.push(0);
        if self.components == 0 {
            self.first_len = component.len();
        }
        self.components += 1;
        Ok(())
    }

    /// Number of components pushed.
    pub fn len(&self) -> usize {
        self.components
    }

    /// Whether no component was pushed.
    pub fn is_empty(&self) -> bool {
        self.components == 0
    }

    /// The bytes to hash: the bare value for one component, the composite
    /// encoding for several.
    pub fn finish(&self) -> &[u8] {
        if self.components == 1 {
            &self.buf[2..2 + self.first_len]
        } else {
            &self.buf
        }
    }
}

/// The hashed bytes of a key given as its serialized components.
pub fn serialize_partition_key(components: &[&[u8]]) -> Result<Vec<u8>, EncodeError> {
    let mut b = PartitionKeyBuilder::new();
    for c in components {
        b.push(c)?;
    }
    Ok(b.finish().to_vec())
}
