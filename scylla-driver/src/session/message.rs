//! The messages a request sends, written per attempt for the attempt's
//! connection ([`WireContext`]): on protocol v5 QUERY and BATCH carry the
//! session's keyspace, PREPARE the keyspace the statement was first prepared
//! in, and EXECUTE the statement's result metadata id (also on v4 with
//! ScyllaDB's `SCYLLA_USE_METADATA_ID`), which makes skipping the result
//! metadata safe. Each attempt may change the consistency (the retry
//! policy's decision) without re-building the message. On a connection that
//! negotiated tablets routing v2, EXECUTE also carries the attempt's tablet
//! version block.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::BytesMut;
use scylla_cql::frame::request::{Execute, Query, QueryParameters};
use scylla_cql::frame::{MessageBody, Opcode, ProtocolVersion};
use scylla_cql::Consistency;
use scylla_cql::EncodeError;

use crate::statement::prepared::ResultShape;

/// What the connection of an attempt speaks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WireContext {
    /// Its protocol version.
    pub(crate) version: ProtocolVersion,
    /// Whether it has result metadata ids (v5, or v4 with
    /// `SCYLLA_USE_METADATA_ID`): EXECUTE then carries one.
    pub(crate) metadata_id: bool,
    /// The tablet version block an EXECUTE carries: `Some` exactly on a
    /// connection that negotiated tablets routing v2.
    pub(crate) tablet_block: Option<u8>,
}

/// What preparing a statement again needs: its text and the keyspace it was
/// first prepared in.
pub(crate) struct Reprepare<'a> {
    pub(crate) text: &'a str,
    pub(crate) keyspace: Option<&'a str>,
}

/// A request message whose consistency each attempt may change.
pub(crate) trait MessageFor: Sync {
    /// The opcode of the message.
    fn opcode(&self) -> Opcode;
    /// Encodes the body at consistency `c`, as the connection in `wire`
    /// writes it.
    fn encode_body_at(
        &self,
        c: Consistency,
        buf: &mut BytesMut,
        wire: WireContext,
    ) -> Result<(), EncodeError>;
    /// How to prepare statement `id` again when a node answers UNPREPARED.
    fn reprepare(&self, id: &[u8]) -> Option<Reprepare<'_>>;
}

/// A message at one consistency for one connection: what an attempt sends.
/// Borrowed, so an attempt allocates nothing to build it.
pub(crate) struct AtConsistency<'m> {
    pub(crate) msg: &'m dyn MessageFor,
    pub(crate) consistency: Consistency,
    pub(crate) metadata_id: bool,
    /// See [`WireContext::tablet_block`].
    pub(crate) tablet_block: Option<u8>,
}

impl MessageBody for AtConsistency<'_> {
    fn opcode(&self) -> Opcode {
        self.msg.opcode()
    }

    fn encode_body(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError> {
        let wire = WireContext {
            version,
            metadata_id: self.metadata_id,
            tablet_block: self.tablet_block,
        };
        self.msg.encode_body_at(self.consistency, buf, wire)
    }
}

/// The session keyspace as a v5 request carries it (v4 cannot).
pub(crate) fn keyspace_on<'k>(
    wire: WireContext,
    keyspace: Option<&'k Arc<String>>,
) -> Option<Cow<'k, str>> {
    match wire.version {
        ProtocolVersion::V5 => keyspace.map(|k| Cow::Borrowed(k.as_str())),
        ProtocolVersion::V4 => None,
    }
}

/// `params` at consistency `c`, borrowing everything else.
pub(crate) fn params_at<'p>(p: &'p QueryParameters<'_>, c: Consistency) -> QueryParameters<'p> {
    QueryParameters {
        consistency: c,
        values: Cow::Borrowed(&*p.values),
        skip_metadata: p.skip_metadata,
        page_size: p.page_size,
        paging_state: p.paging_state.as_deref().map(Cow::Borrowed),
        serial_consistency: p.serial_consistency,
        default_timestamp: p.default_timestamp,
        keyspace: p.keyspace.as_deref().map(Cow::Borrowed),
        now_in_seconds: p.now_in_seconds,
    }
}

/// A QUERY message at any consistency.
pub(crate) struct QueryMessage<'a> {
    pub(crate) query: Query<'a>,
    /// The session's keyspace, which v5 sends with the query.
    pub(crate) keyspace: Option<Arc<String>>,
}

impl MessageFor for QueryMessage<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Query
    }

    fn encode_body_at(
        &self,
        c: Consistency,
        buf: &mut BytesMut,
        wire: WireContext,
    ) -> Result<(), EncodeError> {
        let mut params = params_at(&self.query.params, c);
        if let Some(ks) = keyspace_on(wire, self.keyspace.as_ref()) {
            params.keyspace = Some(ks);
        }
        Query {
            contents: Cow::Borrowed(&self.query.contents),
            params,
        }
        .encode_body(buf, wire.version)
    }

    fn reprepare(&self, _id: &[u8]) -> Option<Reprepare<'_>> {
        None
    }
}

/// An EXECUTE message at any consistency.
pub(crate) struct ExecuteMessage<'a> {
    /// The prepared statement id.
    pub(crate) id: &'a [u8],
    /// Its parameters (`skip_metadata` is decided per connection).
    pub(crate) params: QueryParameters<'a>,
    /// The statement text, to prepare again on UNPREPARED.
    pub(crate) contents: &'a str,
    /// The keyspace it was prepared in, to prepare it again there.
    pub(crate) prepared_in: Option<&'a str>,
    /// Its result columns and their id, as loaded for this execution.
    pub(crate) result: &'a ResultShape,
    /// Skip the result metadata where the connection has no metadata ids
    /// (the user's opt-in on v4, unsafe across `ALTER TABLE`).
    pub(crate) skip_without_id: bool,
}

impl ExecuteMessage<'_> {
    /// Whether the attempt on a connection in `wire` skips the result
    /// metadata (and the rows are then read with `result`'s columns).
    pub(crate) fn skips_metadata(&self, wire_has_id: bool) -> bool {
        if wire_has_id {
            // With a metadata id the server notices stale columns and sends
            // the new ones (Metadata_changed): skipping is safe.
            self.result.id.is_some() && self.result.specs.is_some()
        } else {
            self.skip_without_id
        }
    }
}

impl MessageFor for ExecuteMessage<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Execute
    }

    fn encode_body_at(
        &self,
        c: Consistency,
        buf: &mut BytesMut,
        wire: WireContext,
    ) -> Result<(), EncodeError> {
        let mut params = params_at(&self.params, c);
        params.skip_metadata = self.skips_metadata(wire.metadata_id);
        // A statement prepared where there were no ids (another node, before
        // a version change) sends an empty one: the server then answers with
        // the current columns and their id, which the statement adopts.
        let result_metadata_id = wire
            .metadata_id
            .then(|| Cow::Borrowed(self.result.id.as_deref().unwrap_or_default()));
        Execute {
            id: Cow::Borrowed(self.id),
            result_metadata_id,
            params,
            tablet_version_block: wire.tablet_block,
        }
        .encode_body(buf, wire.version)
    }

    fn reprepare(&self, id: &[u8]) -> Option<Reprepare<'_>> {
        (id == self.id).then_some(Reprepare {
            text: self.contents,
            keyspace: self.prepared_in,
        })
    }
}

/// A prepared statement of a batch, to prepare it again on UNPREPARED.
pub(crate) struct BatchPrepared<'a> {
    pub(crate) id: &'a [u8],
    pub(crate) text: &'a str,
    pub(crate) keyspace: Option<&'a str>,
}

/// A BATCH message at any consistency.
pub(crate) struct BatchMessage<'a> {
    pub(crate) batch: scylla_cql::frame::request::Batch<'a>,
    /// Its prepared statements, to prepare again on UNPREPARED.
    pub(crate) prepared: Vec<BatchPrepared<'a>>,
    /// The session's keyspace, which v5 sends with the batch.
    pub(crate) keyspace: Option<Arc<String>>,
}

impl MessageFor for BatchMessage<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Batch
    }

    fn encode_body_at(
        &self,
        c: Consistency,
        buf: &mut BytesMut,
        wire: WireContext,
    ) -> Result<(), EncodeError> {
        scylla_cql::frame::request::Batch {
            batch_type: self.batch.batch_type,
            statements: Cow::Borrowed(&self.batch.statements),
            consistency: c,
            serial_consistency: self.batch.serial_consistency,
            default_timestamp: self.batch.default_timestamp,
            keyspace: keyspace_on(wire, self.keyspace.as_ref()),
            now_in_seconds: self.batch.now_in_seconds,
        }
        .encode_body(buf, wire.version)
    }

    fn reprepare(&self, id: &[u8]) -> Option<Reprepare<'_>> {
        self.prepared
            .iter()
            .find(|p| p.id == id)
            .map(|p| Reprepare {
                text: p.text,
                keyspace: p.keyspace,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scylla_cql::frame::request::{Batch, BatchType, Request, RequestContext};

    fn wire(version: ProtocolVersion, metadata_id: bool) -> WireContext {
        WireContext {
            version,
            metadata_id,
            tablet_block: None,
        }
    }

    /// Encodes `msg` for `wire` and decodes it as a server on that connection.
    fn sent(msg: &dyn MessageFor, wire: WireContext) -> Request<'static> {
        let mut buf = BytesMut::new();
        msg.encode_body_at(Consistency::Quorum, &mut buf, wire)
            .unwrap();
        let ctx = RequestContext {
            version: wire.version,
            use_metadata_id: wire.metadata_id,
            tablets_routing_v2: wire.tablet_block.is_some(),
        };
        Request::decode_in(msg.opcode(), &buf, &ctx)
            .unwrap()
            .into_owned()
    }

    #[test]
    fn query_and_batch_carry_the_session_keyspace_on_v5_only() {
        let keyspace = Some(Arc::new("ks1".to_owned()));
        let q = QueryMessage {
            query: Query {
                contents: "SELECT v FROM t".into(),
                params: QueryParameters::default(),
            },
            keyspace: keyspace.clone(),
        };
        let Request::Query(v5) = sent(&q, wire(ProtocolVersion::V5, true)) else {
            panic!("not a query")
        };
        assert_eq!(v5.params.keyspace.as_deref(), Some("ks1"));
        assert_eq!(v5.params.consistency, Consistency::Quorum);
        let Request::Query(v4) = sent(&q, wire(ProtocolVersion::V4, false)) else {
            panic!("not a query")
        };
        assert_eq!(v4.params.keyspace, None);

        let b = BatchMessage {
            batch: Batch {
                batch_type: BatchType::Unlogged,
                statements: Cow::Owned(Vec::new()),
                consistency: Consistency::One,
                serial_consistency: None,
                default_timestamp: None,
                keyspace: None,
                now_in_seconds: Some(5),
            },
            prepared: Vec::new(),
            keyspace,
        };
        let Request::Batch(v5) = sent(&b, wire(ProtocolVersion::V5, true)) else {
            panic!("not a batch")
        };
        assert_eq!(v5.keyspace.as_deref(), Some("ks1"));
        assert_eq!(v5.now_in_seconds, Some(5));
        // now_in_seconds cannot be written for v4.
        let mut buf = BytesMut::new();
        assert!(matches!(
            b.encode_body_at(Consistency::One, &mut buf, wire(ProtocolVersion::V4, false)),
            Err(EncodeError::Invalid(_))
        ));
    }

    #[test]
    fn execute_sends_the_metadata_id_and_skips_metadata_where_it_can() {
        let specs: Arc<[scylla_cql::types::ColumnSpec]> = Arc::from(Vec::new());
        let shape = ResultShape {
            id: Some(bytes::Bytes::from_static(b"id-1")),
            specs: Some(specs),
        };
        let e = ExecuteMessage {
            id: b"stmt",
            params: QueryParameters::default(),
            contents: "SELECT v FROM t",
            prepared_in: Some("ks1"),
            result: &shape,
            skip_without_id: false,
        };
        for (w, id, skip) in [
            (wire(ProtocolVersion::V5, true), Some(&b"id-1"[..]), true),
            (wire(ProtocolVersion::V4, true), Some(&b"id-1"[..]), true),
            (wire(ProtocolVersion::V4, false), None, false),
        ] {
            let Request::Execute(x) = sent(&e, w) else {
                panic!("not an execute")
            };
            assert_eq!(x.result_metadata_id.as_deref(), id, "{w:?}");
            assert_eq!(x.params.skip_metadata, skip, "{w:?}");
            // The keyspace is bound at prepare time, never sent with EXECUTE.
            assert_eq!(x.params.keyspace, None);
        }
        let again = e.reprepare(b"stmt").unwrap();
        assert_eq!(
            (again.text, again.keyspace),
            ("SELECT v FROM t", Some("ks1"))
        );
        assert!(e.reprepare(b"other").is_none());

        // Without an id of its own, a connection with ids gets an empty one
        // (the server answers with the current columns and id) and keeps
        // the metadata.
        let none = ResultShape::default();
        let e = ExecuteMessage { result: &none, ..e };
        let Request::Execute(x) = sent(&e, wire(ProtocolVersion::V5, true)) else {
            panic!("not an execute")
        };
        assert_eq!(x.result_metadata_id.as_deref(), Some(&b""[..]));
        assert!(!x.params.skip_metadata);

        // A tablets routing v2 connection: the block goes after the
        // parameters, and only in EXECUTE.
        let v2 = WireContext {
            tablet_block: Some(0x3A),
            ..wire(ProtocolVersion::V4, false)
        };
        let Request::Execute(x) = sent(&e, v2) else {
            panic!("not an execute")
        };
        assert_eq!(x.tablet_version_block, Some(0x3A));
        let Request::Execute(x) = sent(&e, wire(ProtocolVersion::V4, false)) else {
            panic!("not an execute")
        };
        assert_eq!(x.tablet_version_block, None);
    }
}
