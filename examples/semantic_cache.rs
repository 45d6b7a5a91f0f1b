//! A semantic cache of LLM answers on Cassandra 5's vector search: answers
//! are stored with an embedding of their prompt in a `vector<float, 64>`
//! column with a storage-attached index (cosine similarity); a new prompt
//! is looked up with `ORDER BY embedding ANN OF ? LIMIT k`, and the nearest
//! stored prompt counts as a hit when its cosine similarity to the new one
//! is above a threshold, so a paraphrase is answered from the cache instead
//! of calling the model again.
//!
//! The embeddings are a deterministic function of the text (hashed
//! character trigrams and words, signed, L2-normalised; no model download),
//! so prompts that share wording land near each other and the run is the
//! same every time. The example loads question/answer pairs, asks
//! paraphrases (which must hit the right entry) and unrelated questions
//! (which must miss), and reports the hit rate and the lookup latency. It
//! exits with status 1 if a paraphrase hit rate falls below the floor, a
//! hit returns the wrong entry, or an unrelated question hits.
//!
//! Without `SCYLLA_URI` it runs against a test cluster started in the
//! process, whose vector search is exact (it scores every row); with it,
//! against a Cassandra 5 (approximate search, same answers at this size).
//!
//! ```sh
//! cargo run --example semantic_cache
//! bash scripts/cassandra.sh start
//! SCYLLA_URI=127.0.0.1:9042 cargo run --example semantic_cache
//! ```

#[path = "common/mod.rs"]
mod common;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use scylla_driver::errors::RequestAttemptError;
use scylla_driver::metrics::LatencyHistogram;
use scylla_driver::statement::{Consistency, ExecutionProfile, Statement};
use scylla_driver::{ExecutionError, SessionBuilder};

/// Dimensions of the embedding.
const DIM: usize = 64;
/// Cosine similarity from which the nearest entry answers the prompt.
const THRESHOLD: f32 = 0.70;
/// Neighbours fetched per lookup.
const K: i32 = 3;
/// Lookup rounds over every question (for the latency percentiles).
const ROUNDS: usize = 10;
/// The least share of paraphrases that must hit.
const HIT_RATE_FLOOR: f64 = 0.7;

/// The cached question/answer pairs.
const ENTRIES: &[(&str, &str)] = &[
    (
        "How do I reset my password?",
        "Open Settings > Account > Reset password and follow the e-mail link.",
    ),
    (
        "What is the refund policy for annual plans?",
        "Annual plans are refundable pro rata within 30 days.",
    ),
    (
        "How can I export my data to CSV?",
        "Use Reports > Export and pick CSV as the format.",
    ),
    (
        "Which regions does the service run in?",
        "Europe (Frankfurt), US East (Virginia) and Asia (Singapore).",
    ),
    (
        "How do I add a team member to my workspace?",
        "Workspace settings > Members > Invite, then enter their e-mail.",
    ),
    (
        "Why is my invoice higher than last month?",
        "Usage above the plan's quota is billed per unit at month end.",
    ),
    (
        "How do I enable two-factor authentication?",
        "Settings > Security > Two-factor authentication, scan the QR code.",
    ),
    (
        "What are the API rate limits?",
        "100 requests per second per token, with bursts up to 200.",
    ),
    (
        "How do I delete my account permanently?",
        "Settings > Account > Delete account; data is erased after 14 days.",
    ),
    (
        "Can I change the billing currency?",
        "Yes, before the next renewal, under Billing > Currency.",
    ),
    (
        "How do I connect the Slack integration?",
        "Integrations > Slack > Connect, then authorise the workspace.",
    ),
    (
        "Where can I download the desktop app?",
        "From the Downloads page, for Windows, macOS and Linux.",
    ),
];

/// Paraphrases, with the entry each must be answered from. The last two
/// share meaning but no words with their entry: a lexical embedding cannot
/// see that (a real embedding model would), so they miss, which is why the
/// floor is below 100%.
const PARAPHRASES: &[(&str, usize)] = &[
    ("I forgot my password, how do I reset it?", 0),
    ("What's the refund policy for an annual plan?", 1),
    ("export my data into a CSV file", 2),
    ("In which regions does your service run?", 3),
    ("How can I add a new member to the team workspace?", 4),
    ("why is this month's invoice higher than last month", 5),
    ("How to turn on two factor authentication?", 6),
    ("what rate limits apply to the API", 7),
    ("I want to permanently delete my account", 8),
    ("Is it possible to change my billing currency?", 9),
    ("connecting the Slack integration", 10),
    ("Where do I download the desktop application?", 11),
    ("Can I get my money back on a yearly subscription?", 1),
    ("invite a colleague", 4),
];

/// Questions the cache has no answer for.
const UNRELATED: &[&str] = &[
    "What is the capital of Australia?",
    "Recommend a good pasta recipe with mushrooms",
    "Who won the football world cup in 1998?",
    "Explain quantum entanglement simply",
    "How tall is Mount Kilimanjaro?",
    "Translate good morning into Japanese",
    "What's the weather like in Lisbon tomorrow?",
    "Write a haiku about autumn leaves",
];

/// FNV-1a, 64 bits: a stable hash for the embedding.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Adds the feature `f` with `weight` to `v`: one dimension, a sign.
fn add_feature(v: &mut [f32; DIM], f: &[u8], weight: f32) {
    let h = fnv1a(f);
    let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
    v[(h % DIM as u64) as usize] += sign * weight;
}

/// Words that carry no meaning of their own here.
const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "i", "my", "me", "you", "your", "we", "our", "it", "is", "are", "do", "does",
    "can", "could", "how", "what", "what's", "whats", "s", "to", "of", "for", "in", "on", "as",
    "be", "there", "possible", "way", "please",
];

/// The embedding of `text`: its words but stop words, each with its
/// character trigrams (lower-cased, letters and digits only, a plural `s`
/// dropped), hashed into `DIM` signed dimensions, L2-normalised.
fn embed(text: &str) -> Vec<f32> {
    let normalised: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                ' '
            }
        })
        .collect();
    let mut v = [0f32; DIM];
    for word in normalised.split_whitespace() {
        if STOP_WORDS.contains(&word) {
            continue;
        }
        let word = match word.strip_suffix('s') {
            Some(stem) if stem.len() > 3 && !stem.ends_with('s') => stem,
            _ => word,
        };
        add_feature(&mut v, word.as_bytes(), 1.0);
        let padded = format!(" {word} ");
        let b = padded.as_bytes();
        for tri in b.windows(3) {
            add_feature(&mut v, tri, 0.5);
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v.to_vec()
}

/// Cosine similarity of two vectors.
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// One lookup's result: the nearest entry and its similarity.
struct Nearest {
    id: i32,
    prompt: String,
    similarity: f32,
}

#[tokio::main]
async fn main() -> ExitCode {
    // SCYLLA_URI (a Cassandra 5), or a test cluster started in this process.
    let cluster = match common::cluster().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("semantic_cache: no cluster: {e}");
            return ExitCode::from(1);
        }
    };
    match run(&cluster.uri).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("semantic_cache failed: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run(uri: &str) -> Result<bool, Box<dyn std::error::Error>> {
    let session = SessionBuilder::new()
        .known_node(uri)
        // Cache lookups should be fast or not at all: a short timeout and a
        // single replica (an ANN query reads one replica's index anyway).
        .execution_profile(
            "cache-lookup",
            ExecutionProfile::builder()
                .consistency(Consistency::LocalOne)
                .request_timeout(Some(Duration::from_secs(2)))
                .build(),
        )
        .build()
        .await?;
    let lookup_profile = session.execution_profile("cache-lookup")?;

    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS semantic_cache WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await?;
    session
        .query_unpaged("DROP TABLE IF EXISTS semantic_cache.answers", ())
        .await?;
    session
        .query_unpaged(
            format!(
                "CREATE TABLE semantic_cache.answers (id int PRIMARY KEY, prompt text, \
                 answer text, embedding vector<float, {DIM}>)"
            ),
            (),
        )
        .await?;
    session
        .query_unpaged(
            "CREATE CUSTOM INDEX answers_embedding ON semantic_cache.answers (embedding) \
             USING 'StorageAttachedIndex' WITH OPTIONS = {'similarity_function': 'cosine'}",
            (),
        )
        .await?;

    let insert = session
        .prepare(
            "INSERT INTO semantic_cache.answers (id, prompt, answer, embedding) VALUES (?, ?, ?, ?)",
        )
        .await?;
    for (id, (prompt, answer)) in ENTRIES.iter().enumerate() {
        session
            .execute_unpaged(&insert, (id as i32, *prompt, *answer, embed(prompt)))
            .await?;
    }
    println!(
        "loaded {} answers ({DIM}-dimensional embeddings, cosine SAI index)",
        ENTRIES.len()
    );

    let lookup = session
        .prepare(
            Statement::new(format!(
                "SELECT id, prompt, embedding FROM semantic_cache.answers \
                 ORDER BY embedding ANN OF ? LIMIT {K}"
            ))
            .with_execution_profile(lookup_profile)
            .with_idempotent(true),
        )
        .await?;
    // The index may take a moment to become queryable after CREATE INDEX:
    // retry the first lookup, bounded.
    let probe = embed(ENTRIES[0].0);
    let ready_by = Instant::now() + Duration::from_secs(60);
    loop {
        match session.execute_unpaged(&lookup, (&probe,)).await {
            Ok(r) if r.rows_count() == K as usize => break,
            Ok(_) | Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(..)))
                if Instant::now() < ready_by =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(r) => return Err(format!("the index returns {} rows", r.rows_count()).into()),
            Err(e) => return Err(e.into()),
        }
    }

    let nearest = |prompt: &str| {
        let session = &session;
        let lookup = &lookup;
        let query = embed(prompt);
        async move {
            let started = Instant::now();
            let result = session.execute_unpaged(lookup, (&query,)).await?;
            let took = started.elapsed();
            let mut best: Option<Nearest> = None;
            for row in result.rows::<(i32, String, Vec<f32>)>()? {
                let (id, prompt, embedding) = row?;
                let similarity = cosine(&query, &embedding);
                if best.as_ref().is_none_or(|b| similarity > b.similarity) {
                    best = Some(Nearest {
                        id,
                        prompt,
                        similarity,
                    });
                }
            }
            Ok::<_, ExecutionError>((best, took))
        }
    };

    // The driver's own latency histogram (what its metrics report with).
    let latencies = LatencyHistogram::default();
    let mut slowest = Duration::ZERO;
    let mut ok = true;
    let (mut hits, mut wrong, mut false_hits) = (0usize, 0usize, 0usize);
    for round in 0..ROUNDS {
        let report = round == 0;
        if report {
            println!("\nparaphrases (threshold {THRESHOLD}):");
        }
        for (question, expected) in PARAPHRASES {
            let (best, took) = nearest(question).await?;
            latencies.record(took);
            slowest = slowest.max(took);
            if !report {
                continue;
            }
            match best {
                Some(b) if b.similarity >= THRESHOLD => {
                    let right = b.id as usize == *expected;
                    hits += 1;
                    wrong += usize::from(!right);
                    println!(
                        "  HIT  {:.3} {question:?} -> {:?}{}",
                        b.similarity,
                        b.prompt,
                        if right { "" } else { "  (WRONG ENTRY)" }
                    );
                }
                Some(b) => println!(
                    "  miss {:.3} {question:?} (nearest: {:?})",
                    b.similarity, b.prompt
                ),
                None => println!("  miss  -    {question:?} (no rows)"),
            }
        }
        if report {
            println!("\nunrelated questions:");
        }
        for question in UNRELATED {
            let (best, took) = nearest(question).await?;
            latencies.record(took);
            slowest = slowest.max(took);
            if !report {
                continue;
            }
            match best {
                Some(b) if b.similarity >= THRESHOLD => {
                    false_hits += 1;
                    println!(
                        "  HIT  {:.3} {question:?} -> {:?}  (FALSE HIT)",
                        b.similarity, b.prompt
                    );
                }
                Some(b) => println!(
                    "  miss {:.3} {question:?} (nearest: {:?})",
                    b.similarity, b.prompt
                ),
                None => println!("  miss  -    {question:?} (no rows)"),
            }
        }
    }
    let hit_rate = hits as f64 / PARAPHRASES.len() as f64;
    println!(
        "\nparaphrase hit rate: {hits}/{} = {:.0}% (floor {:.0}%), wrong entries: {wrong}",
        PARAPHRASES.len(),
        hit_rate * 100.0,
        HIT_RATE_FLOOR * 100.0
    );
    println!(
        "unrelated questions answered from the cache: {false_hits}/{}",
        UNRELATED.len()
    );
    println!(
        "lookup latency over {} ANN queries: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        latencies.count(),
        latencies.quantile_micros(0.50).unwrap_or(0) as f64 / 1e3,
        latencies.quantile_micros(0.99).unwrap_or(0) as f64 / 1e3,
        slowest.as_secs_f64() * 1e3,
    );
    if hit_rate < HIT_RATE_FLOOR {
        eprintln!("FAIL: paraphrase hit rate below the floor");
        ok = false;
    }
    if wrong > 0 {
        eprintln!("FAIL: {wrong} paraphrases hit the wrong entry");
        ok = false;
    }
    if false_hits > 0 {
        eprintln!("FAIL: {false_hits} unrelated questions hit the cache");
        ok = false;
    }
    Ok(ok)
}
