//! The AWS provider against moto's EC2 server (see `common/moto.rs`).

use crate::common;

use aws_config::sts::AssumeRoleProvider;
use aws_sdk_ec2::types::InstanceStateName;
use common::moto::{emulator, launch_with, states, Fixture, Launch, G5};
use ebb::cloud::aws::{AwsProvider, Settings};
use ebb::cloud::{CapacityReservations, ErrorKind, Provider, Resize, StopKind};
use ebb::fleet::{Instance, InstanceState, Lifecycle};
use std::collections::{BTreeMap, BTreeSet};

#[tokio::test]
async fn inventory_reads_every_page_with_gpu_facts_and_only_managed_instances() {
    let f = Fixture::new("us-west-1").await;
    let region = f.region;
    let mut managed = BTreeSet::new();
    for n in 0..23 {
        let instance_type = ["g5.xlarge", "p4d.24xlarge", "m5.large"][n % 3];
        let spot = n == 4;
        managed.insert(
            f.launch(Launch {
                instance_type,
                spot,
                ..G5
            })
            .await,
        );
    }
    let mut unmanaged = Vec::new();
    for _ in 0..3 {
        unmanaged.push(
            f.launch(Launch {
                managed: false,
                ..G5
            })
            .await,
        );
    }
    let provider = AwsProvider::connect(Settings {
        page_size: 5,
        ..f.settings()
    })
    .await
    .unwrap();

    let inventory = provider.instances().await;
    assert!(inventory.failures.is_empty(), "{:?}", inventory.failures);
    assert_eq!(inventory.complete_regions, vec![region.to_string()]);
    let seen: BTreeSet<String> = inventory.instances.iter().map(|i| i.id.clone()).collect();
    assert_eq!(seen, managed, "the unmanaged three are filtered out by EC2");
    for instance in &inventory.instances {
        assert_listed_with_gpu_facts(instance, region);
    }
    let spot: Vec<_> = inventory
        .instances
        .iter()
        .filter(|i| i.lifecycle == Lifecycle::Spot)
        .collect();
    assert_eq!(spot.len(), 1);

    // Call economy: ⌈23/5⌉ pages; the three types cost one DescribeInstanceTypes call, and
    // none once cached.
    let calls = provider.calls();
    assert_eq!(calls["DescribeInstances"], 5);
    assert_eq!(calls["DescribeInstanceTypes"], 1);
    provider.instances().await;
    let calls = provider.calls();
    assert_eq!(calls["DescribeInstances"], 10);
    assert_eq!(calls["DescribeInstanceTypes"], 1);
    assert_eq!(Settings::default().page_size, 1000);

    let everything = AwsProvider::connect(Settings {
        managed_tag: None,
        ..f.settings()
    })
    .await
    .unwrap();
    let all: BTreeSet<String> = everything
        .instances()
        .await
        .instances
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert!(unmanaged.iter().all(|id| all.contains(id)));
    assert!(managed.iter().all(|id| all.contains(id)));
}

/// A managed instance of the inventory test as listed: running, tagged, with the GPU facts of
/// its type.
fn assert_listed_with_gpu_facts(instance: &Instance, region: &str) {
    assert_eq!(instance.region, region);
    assert_eq!(instance.state, InstanceState::Running);
    assert!(instance.launched_at.is_some());
    // EC2's PrivateIpAddress, where a jupyter signal's url template finds the box's server.
    let ip = instance.private_ip;
    let private = matches!(ip, Some(std::net::IpAddr::V4(v4)) if v4.is_private());
    assert!(private, "{ip:?}");
    assert_eq!(instance.tag("team"), Some("research"));
    let gpus = instance.gpus.as_ref();
    match instance.instance_type.as_str() {
        "g5.xlarge" => {
            let gpus = gpus.unwrap();
            assert_eq!((gpus.count, gpus.model.as_str()), (1, "NVIDIA A10G"));
            assert!(gpus.memory_mib > 20_000);
        }
        "p4d.24xlarge" => {
            let gpus = gpus.unwrap();
            assert_eq!((gpus.count, gpus.model.as_str()), (8, "NVIDIA A100"));
        }
        _ => assert_eq!(gpus, None),
    }
}

#[tokio::test]
async fn stop_hibernate_and_start_round_trips() {
    let f = Fixture::new("eu-west-1").await;
    let (region, ec2) = (f.region, &f.ec2);
    let can_hibernate = f
        .launch(Launch {
            hibernation: true,
            ..G5
        })
        .await;
    let cannot = f.launch(G5).await;
    let ids = vec![can_hibernate.clone(), cannot.clone()];
    let provider = f.provider().await;
    provider.instances().await;

    let hibernated = provider.stop(region, &ids, StopKind::Hibernate).await;
    assert!(hibernated.failed.is_empty(), "{:?}", hibernated.failed);
    let done: BTreeMap<_, _> = hibernated
        .done
        .iter()
        .map(|d| (d.instance.clone(), d))
        .collect();
    assert_eq!(done[&can_hibernate].fallback, None);
    let fallback = done[&cannot].fallback.as_deref().unwrap();
    assert!(
        fallback.contains("hibernation is not configured"),
        "{fallback}"
    );
    assert!(done.values().all(|d| d.request_id.is_some()));
    assert!(states(ec2, &ids)
        .await
        .values()
        .all(|s| *s == InstanceStateName::Stopped));
    let listed = provider.instances().await;
    assert!(listed
        .instances
        .iter()
        .all(|i| i.state == InstanceState::Stopped));

    let started = provider.start(region, &ids).await;
    assert_eq!(started.done.len(), 2, "{:?}", started.failed);
    assert!(states(ec2, &ids)
        .await
        .values()
        .all(|s| *s == InstanceStateName::Running));

    let stopped = provider.stop(region, &ids, StopKind::Stop).await;
    assert_eq!(stopped.done.len(), 2);
    assert!(stopped.done.iter().all(|d| d.fallback.is_none()));
    assert!(states(ec2, &ids)
        .await
        .values()
        .all(|s| *s == InstanceStateName::Stopped));
    // One batch each way; the hibernation and the plain stop of the first round are two calls.
    let calls = provider.calls();
    assert_eq!(calls["StopInstances"], 3);
    assert_eq!(calls["StartInstances"], 1);
}

#[tokio::test]
async fn a_nonexistent_instance_in_a_batch_does_not_block_the_others() {
    let f = Fixture::new("eu-west-2").await;
    let (region, ec2) = (f.region, &f.ec2);
    let mut ids = Vec::new();
    for _ in 0..7 {
        ids.push(f.launch(G5).await);
    }
    let bogus = "i-0123456789abcdef0".to_string();
    let mut batch = ids.clone();
    batch.insert(3, bogus.clone());
    let provider = f.provider().await;
    provider.instances().await;

    let report = provider.stop(region, &batch, StopKind::Stop).await;
    let done: BTreeSet<String> = report.done.iter().map(|d| d.instance.clone()).collect();
    assert_eq!(done, ids.iter().cloned().collect());
    assert_eq!(report.failed.len(), 1);
    let failed = &report.failed[0];
    assert_eq!(failed.instance, bogus);
    assert_eq!(failed.error.kind, ErrorKind::NotFound);
    assert_eq!(
        failed.error.code.as_deref(),
        Some("InvalidInstanceID.NotFound")
    );
    assert!(states(ec2, &ids)
        .await
        .values()
        .all(|s| *s == InstanceStateName::Stopped));
    // Bisecting 8 ids to one bad one: the whole batch, then two halves at each of three
    // levels.
    assert_eq!(provider.calls()["StopInstances"], 7);
}

#[tokio::test]
async fn spot_and_on_demand_instances_stop_in_one_batch() {
    let f = Fixture::new("eu-central-1").await;
    let (region, ec2) = (f.region, &f.ec2);
    let mut ids = Vec::new();
    for spot in [true, false, true, false] {
        ids.push(f.launch(Launch { spot, ..G5 }).await);
    }
    let provider = f.provider().await;
    let lifecycles: Vec<Lifecycle> = {
        let listed = provider.instances().await.instances;
        ids.iter()
            .map(|id| listed.iter().find(|i| &i.id == id).unwrap().lifecycle)
            .collect()
    };
    assert_eq!(
        lifecycles,
        [
            Lifecycle::Spot,
            Lifecycle::OnDemand,
            Lifecycle::Spot,
            Lifecycle::OnDemand
        ]
    );
    let report = provider.stop(region, &ids, StopKind::Stop).await;
    assert_eq!(report.done.len(), 4, "{:?}", report.failed);
    assert_eq!(provider.calls()["StopInstances"], 1);
    assert!(states(ec2, &ids)
        .await
        .values()
        .all(|s| *s == InstanceStateName::Stopped));
}

#[tokio::test]
async fn stopping_k_instances_costs_one_call_per_batch() {
    let f = Fixture::new("sa-east-1").await;
    let region = f.region;
    let mut ids = Vec::new();
    for _ in 0..25 {
        ids.push(f.launch(G5).await);
    }
    let provider = AwsProvider::connect(Settings {
        batch_size: 10,
        ..f.settings()
    })
    .await
    .unwrap();
    provider.instances().await;
    let report = provider.stop(region, &ids, StopKind::Stop).await;
    assert_eq!(report.done.len(), 25);
    // ⌈25/10⌉.
    assert_eq!(provider.calls()["StopInstances"], 3);
    assert_eq!(Settings::default().batch_size, 100);
}

#[tokio::test]
async fn tags_are_written_and_removed() {
    let f = Fixture::new("ap-southeast-1").await;
    let region = f.region;
    let ids = vec![f.launch(G5).await, f.launch(G5).await];
    let provider = f.provider().await;
    provider.instances().await;
    let tags: BTreeMap<String, String> = [
        ("ebb:notified-at", "2026-11-30T18:50:00Z"),
        ("ebb:migrating", "step-1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();

    let tagged = provider.tag(region, &ids, &tags).await;
    assert_eq!(tagged.done.len(), 2, "{:?}", tagged.failed);
    let listed = provider.instances().await.instances;
    for instance in &listed {
        assert_eq!(instance.tag("ebb:migrating"), Some("step-1"));
        assert_eq!(
            instance.tag("ebb:notified-at"),
            Some("2026-11-30T18:50:00Z")
        );
    }

    let untagged = provider
        .untag(region, &ids, &["ebb:migrating".to_string()])
        .await;
    assert_eq!(untagged.done.len(), 2, "{:?}", untagged.failed);
    // Without keys, EC2 would remove every tag: nothing is called, and each instance fails.
    let no_keys = provider.untag(region, &ids, &[]).await;
    assert!(no_keys.done.is_empty());
    assert_eq!(no_keys.failed.len(), 2);
    assert!(no_keys.failed[0].error.message.contains("no tag keys"));
    assert_eq!(provider.calls()["DeleteTags"], 1);
    let listed = provider.instances().await.instances;
    assert_eq!(listed.len(), 2);
    for instance in &listed {
        assert_eq!(instance.tag("ebb:migrating"), None);
        assert_eq!(
            instance.tag("ebb:notified-at"),
            Some("2026-11-30T18:50:00Z")
        );
        assert_eq!(instance.tag("ebb:managed"), Some(f.managed.as_str()));
    }
}

#[tokio::test]
async fn a_reread_sees_tags_changed_since_the_listing_and_drops_what_left_it() {
    let f = Fixture::new("ap-east-1").await;
    let region = f.region;
    let (kept, unmanaged, terminated) =
        (f.launch(G5).await, f.launch(G5).await, f.launch(G5).await);
    let provider = f.provider().await;
    assert_eq!(provider.instances().await.instances.len(), 3);
    // After the listing, a person protects one box, takes one out of ebb's hands and
    // terminates the third.
    f.ec2
        .create_tags()
        .resources(&kept)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key("ebb:keep-until")
                .value("2026-12-01T18:00:00Z")
                .build(),
        )
        .send()
        .await
        .unwrap();
    f.ec2
        .delete_tags()
        .resources(&unmanaged)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key("ebb:managed")
                .build(),
        )
        .send()
        .await
        .unwrap();
    f.ec2
        .terminate_instances()
        .instance_ids(&terminated)
        .send()
        .await
        .unwrap();

    let ids = [
        kept.clone(),
        unmanaged,
        terminated,
        "i-0123456789abcdef0".to_string(),
    ];
    let fresh = provider.reread(region, &ids).await.unwrap();

    assert_eq!(fresh.len(), 1, "{fresh:?}");
    assert_eq!(fresh[0].id, kept);
    assert_eq!(fresh[0].tag("ebb:keep-until"), Some("2026-12-01T18:00:00Z"));
}

#[tokio::test]
async fn other_accounts_are_reached_by_assuming_a_role() {
    let f = Fixture::new("ap-northeast-1").await;
    let region = f.region;
    let role = "arn:aws:iam::111111111111:role/ebb";
    let own = emulator(region).await;
    let other = own
        .to_builder()
        .credentials_provider(aws_sdk_ec2::config::SharedCredentialsProvider::new(
            AssumeRoleProvider::builder(role)
                .session_name("seed")
                .configure(&own)
                .build()
                .await,
        ))
        .build();
    let mine = f.launch(G5).await;
    let theirs_ec2 = aws_sdk_ec2::Client::new(&other);
    let theirs = launch_with(&theirs_ec2, &f.image, &f.managed, G5).await;

    let provider = AwsProvider::connect(Settings {
        role_arns: vec![role.to_string()],
        ..f.settings()
    })
    .await
    .unwrap();
    let inventory = provider.instances().await;
    assert!(inventory.failures.is_empty(), "{:?}", inventory.failures);
    let seen: BTreeSet<String> = inventory.instances.iter().map(|i| i.id.clone()).collect();
    assert_eq!(seen, [mine.clone(), theirs.clone()].into_iter().collect());
    // Which account each is in: what keeps the spot rule from moving another account's.
    let via = |id: &str| {
        let i = inventory.instances.iter().find(|i| i.id == id).unwrap();
        i.via_role.as_deref().map(str::to_string)
    };
    assert_eq!(via(&mine), None);
    assert_eq!(via(&theirs).as_deref(), Some(role));
    let fresh = provider
        .reread(region, std::slice::from_ref(&theirs))
        .await
        .unwrap();
    assert_eq!(
        fresh[0].via_role.as_deref(),
        Some(role),
        "read again the same"
    );

    // Each is stopped through its own account: EC2 in one account does not know the other's.
    let report = provider
        .stop(region, &[mine.clone(), theirs.clone()], StopKind::Stop)
        .await;
    assert_eq!(report.done.len(), 2, "{:?}", report.failed);
    assert_eq!(
        states(&theirs_ec2, std::slice::from_ref(&theirs)).await[&theirs],
        InstanceStateName::Stopped
    );
}

#[tokio::test]
async fn a_region_named_twice_and_a_role_into_ebbs_own_account_list_each_instance_once() {
    let f = Fixture::new("eu-south-1").await;
    let region = f.region;
    let mine = f.launch(G5).await;
    // moto's own account is 123456789012: this role leads back into it.
    let provider = AwsProvider::connect(Settings {
        regions: vec![region.to_string(), format!(" {region}")],
        role_arns: vec![
            "arn:aws:iam::123456789012:role/ebb".to_string(),
            "arn:aws:iam::123456789012:role/ebb".to_string(),
        ],
        ..f.settings()
    })
    .await
    .unwrap();
    let inventory = provider.instances().await;
    assert!(inventory.failures.is_empty(), "{:?}", inventory.failures);
    let ids: Vec<&str> = inventory.instances.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, [mine.as_str()]);
    assert_eq!(inventory.complete_regions, [region]);
    let report = provider
        .stop(region, std::slice::from_ref(&mine), StopKind::Stop)
        .await;
    assert_eq!(report.done.len(), 1, "{:?}", report.failed);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
}

#[tokio::test]
async fn a_stop_of_a_stopped_instance_is_reported_as_already_stopped() {
    let f = Fixture::new("eu-west-3").await;
    let (running, stopped) = (f.launch(G5).await, f.launch(G5).await);
    let provider = f.provider().await;
    provider.instances().await;
    f.ec2
        .stop_instances()
        .instance_ids(&stopped)
        .send()
        .await
        .unwrap();
    let report = provider
        .stop(
            f.region,
            &[running.clone(), stopped.clone()],
            StopKind::Stop,
        )
        .await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let already: BTreeSet<(String, bool)> = report
        .done
        .iter()
        .map(|d| (d.instance.clone(), d.already))
        .collect();
    assert_eq!(
        already,
        [(running, false), (stopped, true)].into_iter().collect()
    );
}

#[tokio::test]
async fn prices_combine_spot_per_zone_with_the_on_demand_table() {
    let f = Fixture::new("us-east-2").await;
    let region = f.region;
    let provider = f.provider().await;
    let now = "2026-11-30T12:00:00Z".parse().unwrap();
    let prices = provider
        .prices(
            region,
            &["g5.xlarge".to_string(), "x9.nothing".to_string()],
            now,
        )
        .await
        .unwrap();
    assert_eq!(prices.len(), 2);
    let g5 = prices
        .iter()
        .find(|p| p.instance_type == "g5.xlarge")
        .unwrap();
    assert_eq!(g5.on_demand, Some(1.006));
    assert!(g5.spot_by_zone.len() >= 2, "{:?}", g5.spot_by_zone);
    assert!(g5.spot_by_zone.keys().all(|z| z.starts_with(region)));
    assert!(g5.cheapest_spot().is_some());
    let unknown = prices
        .iter()
        .find(|p| p.instance_type == "x9.nothing")
        .unwrap();
    assert_eq!(unknown.on_demand, None);
}

#[tokio::test]
async fn an_unreachable_endpoint_is_reported_per_region_not_as_a_panic() {
    let f = Fixture::new("ca-central-1").await;
    let region = f.region;
    let config = emulator(region).await;
    let scope = ebb::cloud::aws::Scope {
        region: region.to_string(),
        account: None,
        ec2: aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::config::Builder::from(&config)
                .endpoint_url("http://127.0.0.1:9")
                .retry_config(aws_sdk_ec2::config::retry::RetryConfig::disabled())
                .build(),
        ),
        cloudwatch: aws_sdk_cloudwatch::Client::new(&config),
        autoscaling: aws_sdk_autoscaling::Client::new(&config),
        eks: aws_sdk_eks::Client::new(&config),
    };
    let provider = AwsProvider::from_scopes(f.settings(), vec![scope]);
    let inventory = provider.instances().await;
    assert!(inventory.instances.is_empty());
    assert!(inventory.complete_regions.is_empty());
    assert_eq!(inventory.failures.len(), 1);
    let error = &inventory.failures[0].error;
    assert_eq!(error.kind, ErrorKind::Unavailable);
    assert!(error.to_string().contains("AWS_ENDPOINT_URL"), "{error}");
}

#[tokio::test]
async fn ebb_inventory_lists_the_managed_fleet_as_a_table_and_as_a_snapshot() {
    let f = Fixture::new("eu-north-1").await;
    let g5 = f.launch(G5).await;
    let p4d = f
        .launch(Launch {
            instance_type: "p4d.24xlarge",
            spot: true,
            ..G5
        })
        .await;
    let unmanaged = f
        .launch(Launch {
            managed: false,
            ..G5
        })
        .await;
    let ebb = |args: &[&str], tag: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ebb"))
            .arg("inventory")
            .args(args)
            .env("EBB_REGIONS", f.region)
            .env("EBB_MANAGED_TAG", tag)
            .output()
            .unwrap()
    };
    let tag = format!("ebb:managed={}", f.managed);

    let table = ebb(&[], &tag);
    assert!(table.status.success(), "{table:?}");
    let text = String::from_utf8(table.stdout).unwrap();
    let line = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{id} missing:\n{text}"))
            .to_string()
    };
    assert!(line(&g5).contains("1 × NVIDIA A10G"), "{text}");
    assert!(line(&p4d).contains("8 × NVIDIA A100"), "{text}");
    // The lifecycle, then the owner (none).
    let p4d_line = line(&p4d);
    let last: Vec<&str> = p4d_line.split_whitespace().rev().take(2).collect();
    assert_eq!(last, ["-", "spot"], "{text}");
    assert!(!text.contains(&unmanaged), "{text}");
    assert_eq!(text.lines().count(), 3, "{text}");

    let json = ebb(&["--format", "json"], &tag);
    assert!(json.status.success(), "{json:?}");
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("fleet.json");
    std::fs::write(&snapshot, &json.stdout).unwrap();
    let (fleet, _) = ebb::snapshot::load_snapshot(&snapshot).unwrap();
    let ids: BTreeSet<String> = fleet.instances.iter().map(|i| i.id.clone()).collect();
    assert_eq!(ids, [g5.clone(), p4d.clone()].into_iter().collect());
    let plan = std::process::Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(["plan", "--policies"])
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"))
        .arg("--fleet")
        .arg(&snapshot)
        .output()
        .unwrap();
    assert!(plan.status.success(), "{plan:?}");

    let bad = ebb(&[], "oops");
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8(bad.stderr).unwrap();
    assert!(err.contains("KEY=VALUE"), "{err}");
}

#[test]
fn missing_credentials_are_one_line_that_says_what_to_do() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ebb"))
        .arg("inventory")
        .env_clear()
        .env("HOME", home.path())
        .env("AWS_REGION", "eu-south-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: cannot list instances in eu-south-1: DescribeInstances failed"),
        "{err}"
    );
    assert!(err.contains("no credentials found"), "{err}");
    assert!(err.contains("check the AWS credentials"), "{err}");
}

/// Fallback types change a stopped instance's type with ModifyInstanceAttribute.
#[tokio::test]
async fn a_stopped_instance_changes_type() {
    let f = Fixture::new("ap-southeast-2").await;
    let region = f.region;
    let id = f.launch(G5).await;
    let provider = f.provider().await;
    provider.instances().await;
    let stopped = provider
        .stop(region, std::slice::from_ref(&id), StopKind::Stop)
        .await;
    assert!(stopped.failed.is_empty(), "{:?}", stopped.failed);
    let resized = provider.set_type(region, &id, "g6.2xlarge").await;
    assert!(resized.failed.is_empty(), "{:?}", resized.failed);
    assert!(resized.done[0].request_id.is_some());
    let listed = provider.instances().await;
    let instance = listed.instances.iter().find(|i| i.id == id).unwrap();
    assert_eq!(instance.instance_type, "g6.2xlarge");
    assert_eq!(provider.calls()["ModifyInstanceAttribute"], 1);
}

/// `start.reserve_capacity`'s calls against moto (capacity reservations from
/// scripts/moto_server.py): a targeted reservation of the stopped instance's type and zone,
/// tagged with the token in the call and made once for one token, the instance made to start
/// into it and back into open capacity, the reservation cancelled.
#[tokio::test]
async fn a_capacity_reservation_is_made_once_per_token_targeted_and_cancelled() {
    let f = Fixture::new("ap-northeast-2").await;
    let region = f.region;
    let id = f.launch(G5).await;
    let provider = f.provider().await;
    provider.instances().await;
    let stopped = provider
        .stop(region, std::slice::from_ref(&id), StopKind::Stop)
        .await;
    assert!(stopped.failed.is_empty(), "{:?}", stopped.failed);
    let token = format!("ebb-{id}-1796201100");
    let request = ebb::cloud::ReservationRequest {
        instance: id.clone(),
        token: token.clone(),
        ends_at: chrono::Utc::now() + chrono::Duration::hours(1),
    };
    let made = provider.reserve_capacity(region, &request).await.unwrap();
    let again = provider.reserve_capacity(region, &request).await.unwrap();
    assert_eq!(
        made.id, again.id,
        "the client token makes it the same reservation"
    );
    assert_eq!(made.token.as_deref(), Some(token.as_str()));
    assert_eq!(made.instance_type, "g5.xlarge");
    let found = provider.reservations(region, &id, &token).await.unwrap();
    assert_eq!(found.len(), 1);
    let into = provider
        .target_reservation(region, &id, Some(&made.id))
        .await;
    assert!(into.failed.is_empty(), "{:?}", into.failed);
    assert_eq!(
        provider.reservation_target(region, &id).await.unwrap(),
        Some(made.id.clone())
    );
    provider
        .cancel_reservation(region, &id, &made.id)
        .await
        .unwrap();
    let found = provider.reservations(region, &id, &token).await.unwrap();
    assert!(found[0].state.ended(), "{found:?}");
    let back = provider.target_reservation(region, &id, None).await;
    assert!(back.failed.is_empty(), "{:?}", back.failed);
    assert_eq!(
        provider.reservation_target(region, &id).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn the_listing_reads_each_instances_volumes_and_elastic_ips() {
    let f = Fixture::new("ap-southeast-3").await;
    let with_disk = f.launch(G5).await;
    let bare = f.launch(G5).await;
    // A 500 GiB gp3 data volume and an Elastic IP on the first; the second has only the root
    // volume moto gives every instance.
    let zone = f
        .ec2
        .describe_instances()
        .instance_ids(&with_disk)
        .send()
        .await
        .unwrap()
        .reservations()[0]
        .instances()[0]
        .placement()
        .and_then(|p| p.availability_zone())
        .unwrap()
        .to_string();
    let volume = f
        .ec2
        .create_volume()
        .availability_zone(zone)
        .size(500)
        .volume_type(aws_sdk_ec2::types::VolumeType::Gp3)
        .send()
        .await
        .unwrap();
    f.ec2
        .attach_volume()
        .volume_id(volume.volume_id().unwrap())
        .instance_id(&with_disk)
        .device("/dev/sdf")
        .send()
        .await
        .unwrap();
    let address = f.ec2.allocate_address().send().await.unwrap();
    f.ec2
        .associate_address()
        .allocation_id(address.allocation_id().unwrap())
        .instance_id(&with_disk)
        .send()
        .await
        .unwrap();

    let provider = f.provider().await;
    let inventory = provider.instances().await;
    assert!(inventory.failures.is_empty(), "{:?}", inventory.failures);
    let disk = &inventory.attached[&with_disk];
    let volumes = disk.volumes.as_ref().expect("volumes read");
    assert!(
        volumes
            .iter()
            .any(|v| v.volume_type == "gp3" && v.size_gib == 500),
        "{volumes:?}"
    );
    assert_eq!(
        volumes.len(),
        2,
        "the root volume and the data volume: {volumes:?}"
    );
    assert_eq!(disk.elastic_ips, Some(1));
    let bare = &inventory.attached[&bare];
    assert_eq!(bare.volumes.as_ref().map(Vec::len), Some(1), "{bare:?}");
    assert!(bare.volumes.as_ref().unwrap()[0].size_gib > 0);
    assert_eq!(bare.elastic_ips, Some(0));
    // One call of each for the region's two instances; read in full, they are not asked
    // again at the next listing.
    let calls = provider.calls();
    assert_eq!(calls["DescribeVolumes"], 1);
    assert_eq!(calls["DescribeAddresses"], 1);
    let again = provider.instances().await;
    assert_eq!(again.attached[&with_disk], inventory.attached[&with_disk]);
    let calls = provider.calls();
    assert_eq!(calls["DescribeVolumes"], 1);
    assert_eq!(calls["DescribeAddresses"], 1);
}
