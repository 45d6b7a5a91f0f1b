//! Storage-attached indexes (`CREATE CUSTOM INDEX ... USING 'sai'`) and
//! vector search: `SELECT ... ORDER BY v ANN OF [..] LIMIT k` returns the
//! `k` rows whose vectors are most similar to the query vector, nearest
//! first.
//!
//! The search is exact (every row's vector is scored), where Cassandra's
//! index is approximate: on test-sized tables both give the true nearest
//! rows. Scores follow Cassandra's similarity functions, which only decide
//! the order here: cosine `(1 + cos) / 2`, dot product `(1 + a.b) / 2`,
//! euclidean `1 / (1 + d^2)`. Errors (no index, no LIMIT, a LIMIT above
//! 1000) carry Cassandra 5's messages.

use scylla_cql::types::{ColumnType, NativeType};

use super::error::{invalid, CqlError};
use super::store::{Index, Similarity, Table};

/// Cassandra's error for ANN on a column without an index.
pub(crate) const ANN_REQUIRES_INDEX: &str =
    "ANN ordering by vector requires the column to be indexed";
/// The largest LIMIT of an ANN query (Cassandra's default).
pub(crate) const MAX_ANN_LIMIT: usize = 1000;

/// Cassandra's error for an ANN query without a LIMIT (`None`) or with one
/// above [`MAX_ANN_LIMIT`].
pub(crate) fn limit_error(limit: Option<usize>) -> String {
    let given = limit.map_or_else(|| "NO LIMIT".to_owned(), |n| n.to_string());
    format!(
        "Use of ANN OF in an ORDER BY clause requires a LIMIT that is not greater than \
         {MAX_ANN_LIMIT}. LIMIT was {given}"
    )
}

/// Whether `class` names the storage-attached index (also ScyllaDB's
/// vector index, which serves the same queries).
fn is_sai(class: &str) -> bool {
    let c = class.to_ascii_lowercase();
    matches!(
        c.as_str(),
        "sai"
            | "storageattachedindex"
            | "org.apache.cassandra.index.sai.storageattachedindex"
            | "vector_index"
    )
}

/// Index options accepted and ignored (text analysis of SAI on text columns).
const IGNORED_OPTIONS: [&str; 5] = [
    "case_sensitive",
    "normalize",
    "ascii",
    "source_model",
    "index_analyzer",
];

/// The index `name` on `column` of `t`, checked.
pub(crate) fn build(
    t: &Table,
    name: String,
    column: &str,
    class: &str,
    options: &[(String, String)],
) -> Result<Index, CqlError> {
    if !is_sai(class) {
        return invalid(format!(
            "Unable to find custom indexer class '{class}' (the test cluster has only \
             'sai' / 'StorageAttachedIndex')"
        ));
    }
    let Some(i) = t.column_index(column) else {
        return invalid(format!("No column definition found for column {column}"));
    };
    let is_vector = matches!(t.columns[i].typ, ColumnType::Vector { .. });
    let mut similarity = is_vector.then_some(Similarity::Cosine);
    for (k, v) in options {
        match k.to_ascii_lowercase().as_str() {
            "similarity_function" => {
                if !is_vector {
                    return invalid(format!(
                        "similarity_function is only supported on vector columns, \
                         and {column} is {}",
                        t.columns[i].typ
                    ));
                }
                similarity = Some(match v.to_ascii_lowercase().as_str() {
                    "cosine" => Similarity::Cosine,
                    "dot_product" => Similarity::DotProduct,
                    "euclidean" => Similarity::Euclidean,
                    _ => {
                        return invalid(format!(
                            "Invalid similarity function {v}: expected cosine, dot_product \
                             or euclidean"
                        ))
                    }
                });
            }
            o if IGNORED_OPTIONS.contains(&o) => {}
            _ => return invalid(format!("Unsupported index option {k}")),
        }
    }
    Ok(Index {
        name,
        column: column.to_owned(),
        class: class.to_owned(),
        similarity,
    })
}

/// Checks an ANN ordering on `column` of `t` as PREPARE does: the column is
/// a float vector with an index, and the query has a LIMIT.
pub(crate) fn check_prepared(t: &Table, column: &str, has_limit: bool) -> Result<(), CqlError> {
    let Some(i) = t.column_index(column) else {
        return invalid(format!("Undefined column name {column}"));
    };
    float_dimension(&t.columns[i].typ)?;
    if !t.indexes.iter().any(|x| x.column == column) {
        return invalid(ANN_REQUIRES_INDEX);
    }
    if !has_limit {
        return invalid(limit_error(None));
    }
    Ok(())
}

/// The dimension of a `vector<float, n>` type (an error for other types).
pub(crate) fn float_dimension(typ: &ColumnType) -> Result<usize, CqlError> {
    match typ {
        ColumnType::Vector {
            typ: element,
            dimensions: dimension,
        } if **element == ColumnType::Native(NativeType::Float) => Ok(*dimension as usize),
        _ => invalid("ANN ordering is only supported on float vector indexes"),
    }
}

/// The floats of a `vector<float, dim>` value (`None` if the length is not
/// `4 * dim`).
pub(crate) fn floats(b: &[u8], dim: usize) -> Option<Vec<f32>> {
    if b.len() != dim.checked_mul(4)? {
        return None;
    }
    Some(
        b.chunks_exact(4)
            .map(|c| f32::from_be_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The similarity of `row` to `query` (higher is nearer); `None` when it is
/// undefined (a zero vector under cosine).
pub(crate) fn score(sim: Similarity, query: &[f32], row: &[f32]) -> Option<f32> {
    match sim {
        Similarity::Cosine => {
            let (nq, nr) = (dot(query, query).sqrt(), dot(row, row).sqrt());
            if nq == 0.0 || nr == 0.0 {
                return None;
            }
            Some((1.0 + dot(query, row) / (nq * nr)) / 2.0)
        }
        Similarity::DotProduct => Some((1.0 + dot(query, row)) / 2.0),
        Similarity::Euclidean => {
            let d2: f32 = query.iter().zip(row).map(|(x, y)| (x - y) * (x - y)).sum();
            Some(1.0 / (1.0 + d2))
        }
    }
}

/// Checks a query vector: finite floats, and not zero under cosine (as
/// Cassandra refuses).
pub(crate) fn check_query(sim: Similarity, column: &str, q: &[f32]) -> Result<(), CqlError> {
    if q.iter().any(|x| !x.is_finite()) {
        return invalid(format!(
            "The query vector for {column} has a NaN or infinite element"
        ));
    }
    if sim == Similarity::Cosine && dot(q, q) == 0.0 {
        return invalid(format!(
            "Zero and near-zero vectors cannot be indexed or queried with cosine similarity \
             (the query vector for {column} is zero)"
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn scores_order_by_nearness() {
        let q = [1.0, 0.0];
        let near = [0.9, 0.1];
        let far = [-1.0, 0.2];
        for sim in [
            Similarity::Cosine,
            Similarity::DotProduct,
            Similarity::Euclidean,
        ] {
            assert!(
                score(sim, &q, &near).unwrap() > score(sim, &q, &far).unwrap(),
                "{sim:?}"
            );
        }
        assert_eq!(score(Similarity::Cosine, &q, &[0.0, 0.0]), None);
        assert_eq!(score(Similarity::Cosine, &q, &q), Some(1.0));
        assert_eq!(score(Similarity::Euclidean, &q, &q), Some(1.0));
        assert!(check_query(Similarity::Cosine, "v", &[0.0, 0.0]).is_err());
        assert!(check_query(Similarity::Euclidean, "v", &[0.0, 0.0]).is_ok());
        assert!(check_query(Similarity::DotProduct, "v", &[f32::NAN, 0.0]).is_err());
    }

    #[test]
    fn limit_errors_read_as_cassandra_s() {
        assert_eq!(
            limit_error(None),
            "Use of ANN OF in an ORDER BY clause requires a LIMIT that is not greater than \
             1000. LIMIT was NO LIMIT"
        );
        assert!(limit_error(Some(1001)).ends_with("LIMIT was 1001"));
    }

    proptest! {
        /// Floats encoded as a vector value decode back to themselves;
        /// any other length is refused.
        #[test]
        fn vector_floats_round_trip(v in proptest::collection::vec(any::<f32>(), 0..20), extra in 1usize..4) {
            let mut b = Vec::new();
            for x in &v {
                b.extend_from_slice(&x.to_be_bytes());
            }
            let back = floats(&b, v.len()).unwrap();
            prop_assert_eq!(
                back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
            b.extend(std::iter::repeat_n(0u8, extra));
            prop_assert!(floats(&b, v.len()).is_none());
        }
    }
}
