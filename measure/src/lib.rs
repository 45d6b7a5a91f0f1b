//! What the measurement tools of scylla-driver share: the percentile rule
//! every report uses ([`percentile`]) and the SVG chart their timelines are
//! drawn with ([`chart`]).
//!
//! ```
//! let mut latencies = vec![30, 10, 20, 40];
//! latencies.sort_unstable();
//! assert_eq!(measure::percentile(&latencies, 0.5), Some(20));
//! assert_eq!(measure::percentile(&latencies, 0.99), Some(40));
//! ```

pub mod chart;
mod percentile;

pub use percentile::percentile;
