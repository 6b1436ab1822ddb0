//! Fitting the fixed costs of [`Overheads`] to measured one-way times:
//! non-negative least squares on *relative* residuals (so that 4 us and
//! 4 ms messages weigh the same), solved exactly by trying every subset of
//! active costs (there are five).

use crate::predict::{decompose, Overheads};
use crate::rates::ClassRates;
use serde::{Deserialize, Serialize};
use topocomm_transport::Params;

/// One measured point: parameters, size and the median one-way time (s).
#[derive(Clone, Debug)]
pub struct Observation<'a> {
    pub params: &'a Params,
    pub size: u64,
    pub seconds: f64,
}

/// The fitted costs and how well the model then matches the data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub overheads: Overheads,
    /// Root mean square of (predicted - measured) / measured after the fit.
    pub rms_relative: f64,
    /// Observations used.
    pub n: usize,
}

/// Solves the normal equations of a small least-squares problem (Gaussian
/// elimination with partial pivoting); `None` when singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let piv = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            let pivot_row = a[col].clone();
            for (x, p) in a[row][col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| a[i][k] * x[k]).sum();
        x[i] = (b[i] - s) / a[i][i];
    }
    Some(x)
}

/// Fits the overheads of `rates` to `obs`. Costs whose coefficient is zero
/// in every observation (e.g. per_call without single-copy data) stay 0.
pub fn fit(rates: &ClassRates, obs: &[Observation], cma_ok: bool) -> Fit {
    // Rows: relative residual = (copy + k.c - t) / t.
    let rows: Vec<(f64, [f64; 5], f64)> = obs
        .iter()
        .filter(|o| o.seconds.is_finite() && o.seconds > 0.0)
        .map(|o| {
            let (copy, k) = decompose(rates, o.params, o.size, cma_ok);
            (copy, k, o.seconds)
        })
        .collect();
    let usable: Vec<usize> = (0..5)
        .filter(|&j| rows.iter().any(|r| r.1[j] != 0.0))
        .collect();
    let rms = |c: &[f64; 5]| -> f64 {
        if rows.is_empty() {
            return 0.0;
        }
        let s: f64 = rows
            .iter()
            .map(|(copy, k, t)| {
                let pred = copy + k.iter().zip(c).map(|(a, b)| a * b).sum::<f64>();
                ((pred - t) / t).powi(2)
            })
            .sum();
        (s / rows.len() as f64).sqrt()
    };
    let mut best = ([0.0f64; 5], rms(&[0.0; 5]));
    for mask in 1u32..(1 << usable.len()) {
        let act: Vec<usize> = usable
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, &j)| j)
            .collect();
        let n = act.len();
        let mut ata = vec![vec![0.0; n]; n];
        let mut atb = vec![0.0; n];
        for (copy, k, t) in &rows {
            // Row of the scaled system: k_j / t; target (t - copy) / t.
            let y = (t - copy) / t;
            for (a, &ja) in act.iter().enumerate() {
                let xa = k[ja] / t;
                atb[a] += xa * y;
                for (b, &jb) in act.iter().enumerate() {
                    ata[a][b] += xa * k[jb] / t;
                }
            }
        }
        let Some(x) = solve(ata, atb) else { continue };
        if x.iter().any(|v| !v.is_finite() || *v < 0.0) {
            continue;
        }
        let mut c = [0.0; 5];
        for (i, &j) in act.iter().enumerate() {
            c[j] = x[i];
        }
        let e = rms(&c);
        if e < best.1 {
            best = (c, e);
        }
    }
    let c = best.0;
    Fit {
        overheads: Overheads {
            message: c[0],
            rendezvous: c[1],
            per_chunk: c[2],
            per_call: c[3],
            per_page: c[4],
        },
        rms_relative: best.1,
        n: rows.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::predict;
    use crate::predict::tests::{flat_rates, params};

    #[test]
    fn recovers_known_costs_from_synthetic_times() {
        let r = flat_rates(10.0, 5.0);
        let two = Params {
            cma: false,
            ..params()
        };
        let one = Params {
            eager_max: 40,
            cma_threshold: 0,
            adaptive: false,
            cma_chunk: 256 << 10,
            ..params()
        };
        let truth = Overheads {
            message: 0.5e-6,
            rendezvous: 1.5e-6,
            // Hidden behind the slower receiver here, so not identifiable.
            per_chunk: 0.0,
            per_call: 2e-6,
            per_page: 5e-9,
        };
        let sizes = [1024u64, 8192, 65536, 262144, 1 << 20, 4 << 20, 16 << 20];
        let mut obs = Vec::new();
        for &s in &sizes {
            for p in [&two, &one] {
                obs.push(Observation {
                    params: p,
                    size: s,
                    seconds: predict(&r, p, s, &truth, true),
                });
            }
        }
        let f = fit(&r, &obs, true);
        assert!(f.rms_relative < 1e-6, "{f:?}");
        let o = f.overheads;
        for (got, want) in [
            (o.message, truth.message),
            (o.rendezvous, truth.rendezvous),
            (o.per_call, truth.per_call),
            (o.per_page, truth.per_page),
        ] {
            assert!((got - want).abs() <= want * 1e-3, "{o:?}");
        }
        // Costs never go negative, even for times below the pure model.
        let fast: Vec<Observation> = obs
            .iter()
            .map(|o| Observation {
                seconds: o.seconds * 0.5,
                ..o.clone()
            })
            .collect();
        let f = fit(&r, &fast, true);
        let o = f.overheads;
        assert!(
            [o.message, o.rendezvous, o.per_chunk, o.per_call, o.per_page]
                .iter()
                .all(|v| *v >= 0.0)
        );
    }
}
