//! The control plane's certificates: one CA signs the API servers' serving certificate (all of
//! them listen on 127.0.0.1) and the admin client certificate; kube-apiserver trusts client
//! certificates signed by the same CA and maps the organization to groups, so the admin is in
//! `system:masters` and passes RBAC.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::TestEnvError;
use crate::http_client::{BoxBody, HttpsClient};

/// PEM files on disk plus what the in-process HTTPS client needs.
pub(crate) struct Pki {
    pub(crate) ca: PathBuf,
    pub(crate) serving_cert: PathBuf,
    pub(crate) serving_key: PathBuf,
    pub(crate) admin_cert: PathBuf,
    pub(crate) admin_key: PathBuf,
    pub(crate) service_account_key: PathBuf,
    pub(crate) service_account_public: PathBuf,
    ca_der: CertificateDer<'static>,
    admin_cert_der: CertificateDer<'static>,
    admin_key_der: Vec<u8>,
}

impl Pki {
    pub(crate) fn generate(dir: &Path) -> Result<Pki, TestEnvError> {
        std::fs::create_dir_all(dir)
            .map_err(|err| TestEnvError::io(format!("creating {}", dir.display()), err))?;

        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "switchyard-testenv-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, &ca_key);

        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec!["localhost".to_string()])?;
        serving
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &issuer)?;

        let admin_key = KeyPair::generate()?;
        let mut admin = CertificateParams::new(Vec::<String>::new())?;
        admin.distinguished_name.push(DnType::CommonName, "admin");
        admin
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin.signed_by(&admin_key, &issuer)?;

        // kube-apiserver accepts an ECDSA P-256 key for signing service account tokens.
        let service_account = KeyPair::generate()?;

        let pki = Pki {
            ca: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            admin_cert: dir.join("admin.crt"),
            admin_key: dir.join("admin.key"),
            service_account_key: dir.join("sa.key"),
            service_account_public: dir.join("sa.pub"),
            ca_der: ca_cert.der().clone(),
            admin_cert_der: admin_cert.der().clone(),
            admin_key_der: admin_key.serialize_der(),
        };
        for (path, pem) in [
            (&pki.ca, ca_cert.pem()),
            (&pki.serving_cert, serving_cert.pem()),
            (&pki.serving_key, serving_key.serialize_pem()),
            (&pki.admin_cert, admin_cert.pem()),
            (&pki.admin_key, admin_key.serialize_pem()),
            (&pki.service_account_key, service_account.serialize_pem()),
            (
                &pki.service_account_public,
                service_account.public_key_pem(),
            ),
        ] {
            std::fs::write(path, pem)
                .map_err(|err| TestEnvError::io(format!("writing {}", path.display()), err))?;
        }
        Ok(pki)
    }

    /// An HTTP(S) client that trusts the CA and presents the admin certificate: used for
    /// readiness probes and by the fault proxy to reach its upstream.
    pub(crate) fn admin_client(&self) -> Result<HttpsClient, TestEnvError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone())?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(
                vec![self.admin_cert_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.admin_key_der.clone())),
            )?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Client::builder(TokioExecutor::new()).build::<_, BoxBody>(connector))
    }
}
