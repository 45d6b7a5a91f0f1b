//! The comparison workload (see `comparisons/common`) on this workspace's
//! `scylla-driver`, with its default settings (token- and shard-aware
//! routing, LOCAL_QUORUM), over TLS (rustls with `ring`) when `--tls-ca` is
//! given: rustls' record layer (the default), or the driver's with
//! `OURS_TLS_RECORDS=driver`. Only connecting, the schema and the two request closures live
//! here; all timing is in `bench-common`, shared with the official driver's
//! binary.

use std::sync::Arc;
use std::time::Duration;

use scylla_driver::tls::{RecordLayer, TlsConfig};
use scylla_driver::Coalescing;
use scylla_driver::ProtocolVersion;
use scylla_driver::{PreparedStatement, Session, SessionBuilder};

fn main() {
    let args = bench_common::parse_args("bench_ours");
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
                        let (v,) = res
                            .single_row::<(&[u8],)>()
                            .map_err(|e| format!("key {k}: {e}"))?;
                        bench_common::check_value(k, v)
                    }
                };
                bench_common::run(&args, "ours", insert_op, select_op).await
            }
            Err(e) => {
                eprintln!("ours: setup failed: {e}");
                1
            }
        }
    });
    std::process::exit(code);
}

type Setup = (Arc<Session>, Arc<PreparedStatement>, Arc<PreparedStatement>);

async fn setup(args: &bench_common::Args) -> Result<Setup, Box<dyn std::error::Error>> {
    let mut builder = SessionBuilder::new().known_node(&args.node);
    if let Some(tls) = &args.tls {
        // Verifies the server certificate against the CA and the node's IP
        // address (the default `ServerName::PeerIp`).
        let mut config = TlsConfig::builder().ca_pem_file(&tls.ca)?;
        if let Some((cert, key)) = &tls.client {
            config = config.client_cert_pem_files(cert, key)?;
        }
        // OURS_TLS_RECORDS=rustls|driver picks who seals and opens the
        // records (scripts/cost-gate.sh measures both; default: rustls).
        if let Ok(v) = std::env::var("OURS_TLS_RECORDS") {
            let layer = match v.as_str() {
                "rustls" => RecordLayer::Rustls,
                "driver" => RecordLayer::Driver,
                _ => return Err(format!("OURS_TLS_RECORDS={v}: expected rustls or driver").into()),
            };
            config = config.record_layer(layer);
        }
        let config = config.build()?;
        eprintln!("ours: TLS records: {}", config.record_layer());
        builder = builder.tls(config);
    }
    // OURS_PROTOCOL=4|5 pins the protocol version (compare-drivers.sh
    // --ours-protocol); by default the session negotiates.
    if let Ok(v) = std::env::var("OURS_PROTOCOL") {
        let version = v
            .parse::<u8>()
            .ok()
            .and_then(ProtocolVersion::from_number)
            .ok_or_else(|| format!("OURS_PROTOCOL={v}: expected 4 or 5"))?;
        builder = builder.protocol_version(version);
    }
    // OURS_COALESCING=off|adaptive|fixed:MICROS picks the write coalescing
    // policy (default: the driver's, adaptive), to compare policies on the
    // same workload.
    if let Ok(v) = std::env::var("OURS_COALESCING") {
        let policy = match v.split_once(':') {
            None if v == "off" => Coalescing::Off,
            None if v == "adaptive" => Coalescing::ADAPTIVE,
            Some(("fixed", us)) => Coalescing::Fixed(Duration::from_micros(
                us.parse()
                    .map_err(|_| format!("OURS_COALESCING={v}: expected fixed:MICROS"))?,
            )),
            _ => {
                return Err(
                    format!("OURS_COALESCING={v}: expected off, adaptive or fixed:MICROS").into(),
                )
            }
        };
        builder = builder.coalescing(policy);
    }
    let session = builder.build().await?;
    eprintln!("ours: protocol {:?}", session.protocol_version());
    for cql in bench_common::schema(&args.keyspace) {
        session.query_unpaged(cql, ()).await?;
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
