//! Counting the broker's requests to each cluster, as client-go counts them
//! (`rest_client_requests_total{code, method, host}`): a tower layer around every client.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Response};
use tower::{Layer, Service};

use crate::metrics::{Metrics, RestLabels};

/// Counts every request a client sends, by answer code (`<error>` when none came), method
/// and host.
#[derive(Clone)]
pub struct CountRequests {
    metrics: Arc<Metrics>,
    host: String,
}

impl CountRequests {
    pub fn new(metrics: Arc<Metrics>, cluster_url: &http::Uri) -> Self {
        CountRequests {
            metrics,
            host: cluster_url
                .authority()
                .map(|a| a.to_string())
                .unwrap_or_default(),
        }
    }
}

impl<S> Layer<S> for CountRequests {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            counter: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    counter: CountRequests,
}

impl<S, In, Out> Service<Request<In>> for Counted<S>
where
    S: Service<Request<In>, Response = Response<Out>>,
    S::Future: Send + 'static,
{
    type Response = Response<Out>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<Out>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<In>) -> Self::Future {
        let method = request.method().to_string();
        let answer = self.inner.call(request);
        let counter = self.counter.clone();
        Box::pin(async move {
            let result = answer.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            counter
                .metrics
                .rest_client_requests_total
                .get_or_create(&RestLabels {
                    code,
                    method,
                    host: counter.host.clone(),
                })
                .inc();
            result
        })
    }
}

/// A client for `config` whose requests are counted.
pub fn client(config: kube::Config, metrics: &Arc<Metrics>) -> Result<kube::Client, kube::Error> {
    let counter = CountRequests::new(Arc::clone(metrics), &config.cluster_url);
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(builder.with_layer(&counter).build())
}
