//! A response as a connection hands it over: the message and what the
//! frame carried beside it (tracing id, warnings, custom payload).

use scylla_cql::frame::envelope::CustomPayload;
use scylla_cql::frame::response::Response;
use uuid::Uuid;

/// A response and what came with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseFrame {
    /// The response message.
    pub response: Response,
    /// The tracing id, warnings and custom payload.
    pub(super) extras: Extras,
}

/// What a response frame may carry beside its message (the frame flags
/// TRACING, WARNING and CUSTOM_PAYLOAD).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseExtras {
    /// The tracing session, if tracing was requested.
    pub tracing_id: Option<Uuid>,
    /// Server warnings.
    pub warnings: Vec<String>,
    /// The server's custom payload.
    pub custom_payload: Option<CustomPayload>,
}

/// [`ResponseExtras`] as a response and its result carry them: boxed, and
/// only when there is something to carry. Most responses have none, and a
/// response is moved several times on its way from the reader to the caller
/// (each move copies the whole value, so 8 bytes here instead of 96 matter
/// on the hot path).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Extras(Option<Box<ResponseExtras>>);

impl Extras {
    /// `extras`, boxed unless empty (no allocation for the common response).
    pub(crate) fn new(extras: ResponseExtras) -> Self {
        let empty = extras.tracing_id.is_none()
            && extras.warnings.is_empty()
            && extras.custom_payload.is_none();
        Self((!empty).then(|| Box::new(extras)))
    }

    /// Whether the frame carried none.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub(crate) fn tracing_id(&self) -> Option<Uuid> {
        self.0.as_ref().and_then(|e| e.tracing_id)
    }

    pub(crate) fn warnings(&self) -> &[String] {
        self.0.as_ref().map_or(&[], |e| &e.warnings)
    }

    pub(crate) fn custom_payload(&self) -> Option<&CustomPayload> {
        self.0.as_ref().and_then(|e| e.custom_payload.as_ref())
    }
}

impl ResponseFrame {
    /// A frame of `response` with `extras`.
    pub fn new(response: Response, extras: ResponseExtras) -> Self {
        Self {
            response,
            extras: Extras::new(extras),
        }
    }

    /// The tracing session, if tracing was requested.
    pub fn tracing_id(&self) -> Option<Uuid> {
        self.extras.tracing_id()
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// Server warnings (empty for most responses).
    pub fn warnings(&self) -> &[String] {
        self.extras.warnings()
    }

    /// The server's custom payload.
    pub fn custom_payload(&self) -> Option<&CustomPayload> {
        self.extras.custom_payload()
    }

    /// The message and the extras.
    pub(crate) fn into_parts(self) -> (Response, Extras) {
        (self.response, self.extras)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scylla_cql::frame::response::ResultBody;

    #[test]
    fn a_frame_boxes_its_extras_only_when_it_has_some() {
        let plain = ResponseFrame::new(
            Response::Result(ResultBody::Void),
            ResponseExtras::default(),
        );
        assert!(plain.extras.0.is_none());
        assert_eq!(plain.tracing_id(), None);
        assert!(plain.warnings().is_empty());
        assert_eq!(plain.custom_payload(), None);

        let id = Uuid::from_u128(7);
        let mut payload = CustomPayload::new();
        payload.insert("tablets-routing-v1".into(), Some(b"x".to_vec()));
        let extras = ResponseExtras {
            tracing_id: Some(id),
            warnings: vec!["careful".into()],
            custom_payload: Some(payload.clone()),
        };
        let frame = ResponseFrame::new(Response::Result(ResultBody::Void), extras.clone());
        assert_eq!(frame.tracing_id(), Some(id));
        assert_eq!(frame.warnings(), ["careful".to_string()]);
        assert_eq!(frame.custom_payload(), Some(&payload));
        let (response, boxed) = frame.into_parts();
        assert_eq!(response, Response::Result(ResultBody::Void));
        assert_eq!(boxed.0.as_deref(), Some(&extras));

        // Any one of the three is enough to keep them.
        let only_warning = ResponseExtras {
            warnings: vec!["w".into()],
            ..ResponseExtras::default()
        };
        assert!(Extras::new(only_warning).0.is_some());
    }
}
