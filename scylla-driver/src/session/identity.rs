//! [`SelfIdentity`]: the application's and driver's identity a session
//! sends in STARTUP, in the official crate's shape.

use std::borrow::Cow;

/// The application's and driver's identity sent in STARTUP, as the official
/// `scylla` crate builds it for
/// [`SessionBuilder::custom_identity`](crate::SessionBuilder::custom_identity).
/// Unset fields leave the session's settings as they are (the driver's own
/// name and version by default, no application name, version or client id);
/// [`SessionBuilder::application_name`](crate::SessionBuilder::application_name),
/// `application_version` and `client_id` are this crate's names for the same.
///
/// ```
/// use scylla_driver::client::SelfIdentity;
///
/// let identity = SelfIdentity::new()
///     .with_application_name("billing")
///     .with_application_version("2.4.1")
///     .with_client_id("billing-7f9c-pod-3");
/// assert_eq!(identity.get_application_name(), Some("billing"));
/// assert_eq!(identity.get_custom_driver_name(), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelfIdentity<'id> {
    custom_driver_name: Option<Cow<'id, str>>,
    custom_driver_version: Option<Cow<'id, str>>,
    application_name: Option<Cow<'id, str>>,
    application_version: Option<Cow<'id, str>>,
    client_id: Option<Cow<'id, str>>,
}

/// The setter, builder-style setter and getter of one [`SelfIdentity`] field.
macro_rules! identity_field {
    ($field:ident, $set:ident, $with:ident, $get:ident, $what:literal) => {
        #[doc = concat!("Sets ", $what, ".")]
        pub fn $set(&mut self, value: impl Into<Cow<'id, str>>) {
            self.$field = Some(value.into());
        }

        #[doc = concat!("Sets ", $what, " (builder style).")]
        #[must_use]
        pub fn $with(mut self, value: impl Into<Cow<'id, str>>) -> Self {
            self.$set(value);
            self
        }

        #[doc = concat!("Returns ", $what, ", if set.")]
        pub fn $get(&self) -> Option<&str> {
            self.$field.as_deref()
        }
    };
}

impl<'id> SelfIdentity<'id> {
    /// An identity with every field unset.
    pub fn new() -> Self {
        Self::default()
    }

    identity_field!(
        custom_driver_name,
        set_custom_driver_name,
        with_custom_driver_name,
        get_custom_driver_name,
        "the driver name sent instead of this driver's (`DRIVER_NAME`)"
    );
    identity_field!(
        custom_driver_version,
        set_custom_driver_version,
        with_custom_driver_version,
        get_custom_driver_version,
        "the driver version sent instead of this driver's (`DRIVER_VERSION`)"
    );
    identity_field!(
        application_name,
        set_application_name,
        with_application_name,
        get_application_name,
        "the application's name (`APPLICATION_NAME`)"
    );
    identity_field!(
        application_version,
        set_application_version,
        with_application_version,
        get_application_version,
        "the application's version (`APPLICATION_VERSION`)"
    );
    identity_field!(
        client_id,
        set_client_id,
        with_client_id,
        get_client_id,
        "this client instance's identifier (`CLIENT_ID`)"
    );
}
