//! `/pools`: the spot pools' history, per account, region, zone and type: the interruptions,
//! rebalance recommendations and capacity errors ebb saw in the last 24 hours, 7 days and 30
//! days, and the last reclaim, most recently reclaimed first.

use super::{ok, scroll, time, Nav, PageResult};
use crate::api::ApiState;
use crate::fleet::pools::Counts;
use axum::extract::State;
use maud::{html, Markup};

/// A pool's counts as three cells.
fn cells(c: &Counts) -> Markup {
    html! {
        td.num { (c.day) }
        td.num { (c.week) }
        td.num { (c.month) }
    }
}

pub(super) async fn page(State(state): State<ApiState>) -> PageResult {
    let now = state.clock.now();
    let mut pools = state.store.pool_history(now).await?.summaries(now);
    pools.sort_by_key(|p| std::cmp::Reverse(p.last_reclaim));
    let body = html! {
        @if pools.is_empty() {
            p { "No spot interruption, rebalance recommendation or capacity error in the last 30 days." }
        } @else {
            p { "Counts in the last 24 hours, 7 days and 30 days. A start's zone is not known (–). The spot rule ranks pools by expected cost from this history; a pool reclaimed within a policy's avoid_reclaimed_for is skipped." }
            (scroll("Spot pools", html! {
                table {
                    thead {
                        tr {
                            th scope="col" rowspan="2" { "Pool" }
                            th scope="colgroup" colspan="3" { "Interruptions" }
                            th scope="colgroup" colspan="3" { "Rebalance recommendations" }
                            th scope="colgroup" colspan="3" { "Capacity errors" }
                            th scope="col" rowspan="2" { "Last reclaim" }
                        }
                        tr {
                            @for _ in 0..3 {
                                th scope="col" { "24 h" }
                                th scope="col" { "7 d" }
                                th scope="col" { "30 d" }
                            }
                        }
                    }
                    tbody {
                        @for p in &pools {
                            tr {
                                th scope="row" {
                                    (p.pool.instance_type) " in "
                                    @if p.pool.zone.is_empty() { "–" } @else { (p.pool.zone) }
                                    " (" (p.pool.region)
                                    @if !p.pool.account.is_empty() { ", account " (p.pool.account) }
                                    ")"
                                }
                                (cells(&p.interruptions))
                                (cells(&p.rebalances))
                                (cells(&p.capacity_errors))
                                td { @if let Some(t) = p.last_reclaim { (time(t)) } @else { "–" } }
                            }
                        }
                    }
                }
            }))
        }
    };
    Ok(ok("Spot pools", Nav::Pools, body))
}
