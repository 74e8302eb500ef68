//! `/policies`: the policy set in force, its version, why the files on disk cannot be used
//! when they cannot, and which calendars may have run out.

use super::{ok, scroll, Nav, PageResult};
use crate::api::ApiState;
use axum::extract::State;
use maud::html;

pub(super) async fn page(State(state): State<ApiState>) -> PageResult {
    let body = match crate::policies::current(&state.policies).await {
        Err(err) => html! {
            p.problem role="alert" {
                "No valid policy set has been loaded, so ebb takes no action: " (err.to_string())
            }
        },
        Ok(loaded) => {
            let version = &loaded.set.version;
            let today = state.clock.now().date_naive();
            let running_out = loaded.set.calendars_running_out(today);
            html! {
                @for why in &running_out {
                    p.problem role="alert" { (why) }
                }
                @if let Some(error) = &loaded.error {
                    p.problem role="alert" {
                        "The files on disk cannot be used; the last valid set stays in force. "
                        (error)
                    }
                } @else {
                    p.intact { "The files on disk are valid and in force." }
                }
                dl.facts {
                    dt { "Version" } dd { code { (version.to_string()) } }
                    dt { "Content sha256" } dd { code.hash { (version.content_hash) } }
                    dt { "Git commit" } dd { code { (version.git_commit.as_deref().unwrap_or("not in a git work tree")) } }
                }
                (scroll("Policies", html! {
                    table {
                        thead {
                            tr {
                                th scope="col" { "Policy" }
                                th scope="col" { "Priority" }
                                th scope="col" { "Rules" }
                                th scope="col" { "Dry run" }
                                th scope="col" { "File" }
                                th scope="col" { "Description" }
                            }
                        }
                        tbody {
                            @for p in &loaded.set.policies {
                                tr {
                                    th scope="row" { (p.name) }
                                    td.num { (p.priority) }
                                    td {
                                        @let rules: Vec<&str> = [
                                            p.work_hours.as_ref().map(|_| "work hours"),
                                            p.idle.as_ref().map(|_| "idle"),
                                            p.notify.as_ref().map(|_| "notice"),
                                            p.spot.as_ref().map(|_| "spot"),
                                        ].into_iter().flatten().collect();
                                        (rules.join(", "))
                                    }
                                    td { @if p.dry_run { "yes" } @else { "no" } }
                                    td { code { (p.source.to_string()) } }
                                    td { (p.description.as_deref().unwrap_or("")) }
                                }
                            }
                        }
                    }
                }))
            }
        }
    };
    Ok(ok("Policies", Nav::Policies, body))
}
