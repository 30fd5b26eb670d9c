//! The builder methods every wire's model shares: one definition of how a wire's [`Endpoint`] is set up
//! (base URL, key, timeout, retries, window, headers, query, streaming, limits, tool-name limit).
//!
//! [`Endpoint`]: super::http::Endpoint

/// Expands, inside a wire model's `impl` block (a struct with an `endpoint: Endpoint` field), to the
/// builder methods every wire has. `$wire` names the wire in configuration errors; `$limit` is the
/// wire's own tool-name limit in `crate::tools::wire_name`.
macro_rules! endpoint_builders {
    (wire: $wire:literal, name_limit: $limit:ident) => {
        /// Sets the provider's base URL, to which the wire's path is appended (default: see `new`).
        pub fn base_url(mut self, url: impl Into<String>) -> Self {
            self.endpoint.base_url = url.into();
            self
        }

        /// Sets the API key (default: from the environment variable, see `new`).
        pub fn api_key(mut self, key: impl Into<String>) -> Self {
            self.endpoint.api_key = Some(key.into());
            self
        }

        /// The limit on one HTTP request, retries not included (default 600 s).
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.endpoint.timeout = timeout;
            self.endpoint.reset_client();
            self
        }

        /// Sets how many times a failed request is retried (default 2).
        pub fn max_retries(mut self, n: u32) -> Self {
            self.endpoint.retry.max_retries = n;
            self
        }

        /// The context window in tokens (default: the model family's, [`crate::model::window`]).
        pub fn context_window(mut self, tokens: u64) -> Self {
            self.endpoint.context_window = Some(tokens);
            self
        }

        /// A header every request carries, replacing the wire's own of that name (Azure OpenAI's `api-key`,
        /// `OpenAI-Organization`, `OpenAI-Project`, …); a name that is not a header's, one the HTTP exchange
        /// sets itself, or a value a header cannot carry is a configuration error naming the header.
        pub fn header(mut self, name: &str, value: &str) -> Result<Self, crate::Error> {
            self.endpoint.add_header(name, value).map_err(crate::model::settings::config_error)?;
            Ok(self)
        }

        /// A query parameter every request's URL carries (Azure OpenAI's `api-version`).
        pub fn query(mut self, name: &str, value: &str) -> Result<Self, crate::Error> {
            self.endpoint.add_query(name, value).map_err(crate::model::settings::config_error)?;
            Ok(self)
        }

        /// Streams answers (SSE): text reaches the run's events as it is written.
        pub fn stream(mut self, on: bool) -> Self {
            self.endpoint.stream = on;
            self
        }

        /// What one answer may hold (default [`WireLimits::default`](crate::model::WireLimits::default)).
        pub fn limits(mut self, limits: crate::model::WireLimits) -> Self {
            self.endpoint.limits = limits;
            self
        }

        #[doc = concat!(
            "A limit on tool names smaller than the wire's own ([`", stringify!($limit), "`](crate::tools::wire_name::",
            stringify!($limit), ") bytes), for an endpoint that holds names shorter (SPEC §3): longer names reach it cut\n",
            "to fit. A value above the wire's limit, or below\n",
            "[`MIN_TOOL_NAME_BYTES`](crate::tools::wire_name::MIN_TOOL_NAME_BYTES), is a configuration error naming\n",
            "`max_tool_name_bytes`."
        )]
        pub fn with_max_tool_name_bytes(mut self, bytes: usize) -> Result<Self, crate::Error> {
            let limit = crate::tools::wire_name::$limit;
            self.endpoint.max_tool_name_bytes = Some(crate::tools::wire_name::endpoint_limit($wire, limit, bytes)?);
            Ok(self)
        }
    };
}

pub(crate) use endpoint_builders;
