//! The comparison workload (see `comparisons/common`) on the official
//! ScyllaDB Rust driver, with its default settings: token- and shard-aware
//! routing, LOCAL_QUORUM; over TLS (its `rustls-023` feature) when
//! `--tls-ca` is given. Only connecting, the schema and the two request
//! closures live here; all timing is in `bench-common`.

use std::sync::Arc;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;

fn main() {
    let args = bench_common::parse_args("bench_official");
    let rt = bench_common::runtime(args.threads);
    let code = rt.block_on(async {
        match setup(&args).await {
            Ok((session, insert, select)) => {
                let insert_op = {
                    let (session, insert) = (session.clone(), insert.clone());
                    move |k: i64| {
                        let (session, insert) = (session.clone(), insert.clone());
                        async move {
                            let v = bench_common::value_for(k);
                            session
                                .execute_unpaged(&insert, (k, &v[..]))
                                .await
                                .map(|_| ())
                                .map_err(|e| e.to_string())
                        }
                    }
                };
                let select_op = move |k: i64| {
                    let (session, select) = (session.clone(), select.clone());
                    async move {
                        let res = session
                            .execute_unpaged(&select, (k,))
                            .await
                            .map_err(|e| e.to_string())?;
                        let rows = res.into_rows_result().map_err(|e| e.to_string())?;
                        let (v,) = rows
                            .single_row::<(&[u8],)>()
                            .map_err(|e| format!("key {k}: {e}"))?;
                        bench_common::check_value(k, v)
                    }
                };
                bench_common::run(&args, "official", insert_op, select_op).await
            }
            Err(e) => {
                eprintln!("official: setup failed: {e}");
                1
            }
        }
    });
    std::process::exit(code);
}

type Setup = (
    Arc<Session>,
    Arc<scylla::statement::prepared::PreparedStatement>,
    Arc<scylla::statement::prepared::PreparedStatement>,
);

async fn setup(args: &bench_common::Args) -> Result<Setup, Box<dyn std::error::Error>> {
    let mut builder = SessionBuilder::new().known_node(&args.node);
    if let Some(tls) = &args.tls {
        builder = builder.tls_context(Some(rustls_config(tls)?));
    }
    let session = builder.build().await?;
    for cql in bench_common::schema(&args.keyspace) {
        session.query_unpaged(cql, &[]).await?;
    }
    session.await_schema_agreement().await?;
    let insert = session
        .prepare(bench_common::insert_cql(&args.keyspace))
        .await?;
    let select = session
        .prepare(bench_common::select_cql(&args.keyspace))
        .await?;
    Ok((Arc::new(session), Arc::new(insert), Arc::new(select)))
}

/// The rustls configuration for `--tls-ca` (and `--tls-cert`/`--tls-key`):
/// the same crypto provider (`ring`), protocol versions (TLS 1.2 and 1.3)
/// and verification as ours. The official driver verifies the certificate
/// against the node's IP address (`ServerName::IpAddress`).
fn rustls_config(
    tls: &bench_common::TlsFiles,
) -> Result<Arc<rustls::ClientConfig>, Box<dyn std::error::Error>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&read(&tls.ca)?) {
        roots.add(cert?)?;
    }
    if roots.is_empty() {
        return Err(format!("no CA certificate in {}", tls.ca.display()).into());
    }
    // Explicit provider: the `scylla` crate enables rustls' default features
    // (aws-lc-rs), and ours uses ring; both providers are compiled in, so
    // rustls cannot pick a process default by itself.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let config = match &tls.client {
        Some((cert, key)) => {
            let chain =
                CertificateDer::pem_slice_iter(&read(cert)?).collect::<Result<Vec<_>, _>>()?;
            let key = PrivateKeyDer::from_pem_slice(&read(key)?)?;
            config.with_client_auth_cert(chain, key)?
        }
        None => config.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}
