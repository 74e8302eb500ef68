//! The idle rule's `gpu_memory_below`: a notebook that holds a model but computes nothing is not
//! idle; without the key, memory changes nothing; a window whose samples lack the memory is
//! short of data, counted as `missing_metrics` says. Through `engine::decide` and the replay's
//! decider (`engine::Decider`), which must agree.

use crate::common;

use common::*;
use ebb::engine::{Action, Code, Decider};
use ebb::fleet::Sample;

/// Idle below 5 % for 30 minutes; with `memory`, also below that many MiB.
fn policy(memory: Option<u32>, missing: &str) -> ebb::policy::PolicySet {
    let memory = memory.map_or(String::new(), |m| format!(", gpu_memory_below: {m}"));
    policies(&format!(
        r#"
policies:
  - name: notebooks
    match: {{tags: {{workload: notebook}}}}
    idle: {{gpu_below: 5, for: 30m, missing_metrics: {missing}{memory}}}
"#
    ))
}

/// A notebook at 1 % from 11:25 to 12:00 every 5 minutes, holding `memory(k)` MiB at the k-th.
fn notebook(memory: impl Fn(usize) -> Option<u32>) -> World {
    let mut i = instance("i-nb", &[("workload", "notebook")]);
    i.gpu_util = steady("2026-11-30T11:25:00Z", "2026-11-30T12:00:00Z", 1.0)
        .into_iter()
        .enumerate()
        .map(|(k, s)| Sample {
            memory_mib: memory(k),
            ..s
        })
        .collect();
    World::with(vec![i])
}

const NOW: &str = "2026-11-30T12:00:00Z";

/// The verdict of `decide` and of the replay's decider, which must be the same.
fn verdict(w: &World, set: &ebb::policy::PolicySet) -> (Action, Code, String) {
    let d = w.one(NOW, set);
    let (fleet, prior) = w.fleet();
    let mut decider = Decider::new(set);
    let replayed = decider.decide(t(NOW), &fleet, &prior);
    assert_eq!(
        (replayed[0].action, replayed[0].code),
        (d.action, d.code),
        "the replay's decider agrees"
    );
    (d.action, d.code, d.reason)
}

#[test]
fn a_notebook_holding_a_model_is_not_idle_under_gpu_memory_below() {
    // 12 GiB held through the window, the GPU at 1 %.
    let holding = notebook(|_| Some(12_288));
    let (action, code, reason) = verdict(&holding, &policy(Some(2048), "busy"));
    assert_eq!((action, code), (Action::None, Code::NotIdle), "{reason}");
    assert!(
        reason.contains("12288 MiB") && reason.contains("2048 MiB"),
        "{reason}"
    );
    // Without the key memory is not looked at: the same notebook is stopped as before.
    let (action, code, _) = verdict(&holding, &policy(None, "busy"));
    assert_eq!((action, code), (Action::Stop, Code::Idle));
    // One sample at the limit is enough to keep it; all below, it is idle.
    let once = notebook(|k| Some(if k == 3 { 2048 } else { 300 }));
    assert_eq!(verdict(&once, &policy(Some(2048), "busy")).1, Code::NotIdle);
    let below = notebook(|_| Some(2047));
    let (action, code, _) = verdict(&below, &policy(Some(2048), "busy"));
    assert_eq!((action, code), (Action::Stop, Code::Idle));
}

#[test]
fn samples_without_memory_are_missing_data_for_gpu_memory_below() {
    // The agent publishes no memory: not covered, so missing_metrics decides.
    let unknown = notebook(|_| None);
    let (action, code, reason) = verdict(&unknown, &policy(Some(2048), "busy"));
    assert_eq!(
        (action, code),
        (Action::None, Code::MetricsMissing),
        "{reason}"
    );
    assert!(reason.contains("without a GPU memory reading"), "{reason}");
    let (action, code, _) = verdict(&unknown, &policy(Some(2048), "idle"));
    assert_eq!((action, code), (Action::Stop, Code::IdleMetricsMissing));
    // One sample of the window without it is enough.
    let one_missing = notebook(|k| (k != 2).then_some(100));
    assert_eq!(
        verdict(&one_missing, &policy(Some(2048), "busy")).1,
        Code::MetricsMissing
    );
    // A model held is kept even where missing_metrics would say idle.
    let held = notebook(|k| (k == 2).then_some(8192));
    assert_eq!(verdict(&held, &policy(Some(2048), "idle")).1, Code::NotIdle);
}
