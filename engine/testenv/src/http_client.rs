//! The HTTP types the readiness probes, the admin client and the proxies share: a boxed
//! request/response body and an HTTPS client sending it.

use bytes::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type BoxBody = http_body_util::combinators::BoxBody<Bytes, BoxError>;
pub(crate) type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, BoxBody>;
