//! The value scale of a chart drawn stretched (`preserveAspectRatio="none"`): [`TICKS`] round
//! steps from zero that reach the largest value, a grid line at each in the drawing, and their
//! labels in HTML beside it (console.css places a label at each step), so that their text keeps
//! its shape.

use crate::budget::money;
use maud::{html, Markup};

/// The lines of the scale above its zero.
pub(super) const TICKS: usize = 4;

/// The amount between two lines of the scale: a round figure (1, 2, 2.5 or 5 times a power of
/// ten) such that [`TICKS`] of them reach `most`.
pub(super) fn step(most: f64) -> f64 {
    let least = (most / TICKS as f64).max(0.01);
    let power = 10f64.powf(least.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|step| *step >= least * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}

/// The top of a scale of `step`.
pub(super) fn top(step: f64) -> f64 {
    TICKS as f64 * step
}

/// A figure of the scale in `currency`: whole amounts without cents.
fn label(v: f64, currency: &str) -> String {
    let shown = money(v, currency);
    if v.fract() == 0.0 {
        shown.replacen(".00", "", 1)
    } else {
        shown
    }
}

/// The labels of a scale of `step` in `currency`, for the column beside the drawing.
pub(super) fn labels(step: f64, currency: &str) -> Markup {
    html! {
        div.scale aria-hidden="true" {
            @for k in 0..=TICKS {
                span class=(format!("tick-{k}")) { (label(k as f64 * step, currency)) }
            }
        }
    }
}

/// The grid lines of the scale in a drawing `width` by `height`.
pub(super) fn grid(width: f64, height: f64) -> Markup {
    html! {
        @for k in 1..=TICKS {
            @let y = height * (1.0 - k as f64 / TICKS as f64);
            line.grid x1="0" x2=(width) y1=(format!("{y:.1}")) y2=(format!("{y:.1}")) {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_reaches_the_largest_value_in_round_steps() {
        for (most, want) in [
            (107.55, 50.0),
            (100.0, 25.0),
            (0.0, 0.01),
            (0.3, 0.1),
            (9.0, 2.5),
            (12_000.0, 5000.0),
        ] {
            assert_eq!(step(most), want, "{most}");
            assert!(top(step(most)) >= most);
        }
        assert_eq!(label(250.0, "USD"), "$250");
        assert_eq!(label(1000.0, "USD"), "$1,000");
        assert_eq!(label(2.5, "USD"), "$2.50");
        assert_eq!(label(500.0, "CNY"), "¥500");
        assert_eq!(label(0.0, "EUR"), "0 EUR");
    }
}
