//! moto's EC2 emulator for the tests: `scripts/test` starts it and points `AWS_ENDPOINT_URL` at
//! it. Each test works in a region of its own and tags its instances with a management tag value
//! of its own, so tests share one server without seeing each other's instances.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_ec2::types::{
    HibernationOptionsRequest, InstanceMarketOptionsRequest, InstanceStateName, InstanceType,
    MarketType, ResourceType, Tag, TagSpecification,
};
use ebb::cloud::aws::{AwsProvider, Settings};

use std::collections::BTreeMap;

/// One test's corner of the emulator: a region, and a management tag value no other test (or
/// earlier run on the same server) uses.
pub struct Fixture {
    /// The region.
    pub region: &'static str,
    /// EC2 in it, as the test (not ebb) sees it.
    pub ec2: aws_sdk_ec2::Client,
    /// An image to launch.
    pub image: String,
    /// The value of `ebb:managed` on this test's managed instances.
    pub managed: String,
}

impl Fixture {
    pub async fn new(region: &'static str) -> Fixture {
        let ec2 = aws_sdk_ec2::Client::new(&emulator(region).await);
        let image = ec2.describe_images().send().await.unwrap().images()[0]
            .image_id()
            .unwrap()
            .to_string();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        Fixture {
            region,
            ec2,
            image,
            managed: format!("run-{nanos}"),
        }
    }

    /// Provider settings: this fixture's region and management tag, no retries (moto does not
    /// throttle), and the shipped price table.
    pub fn settings(&self) -> Settings {
        Settings {
            regions: vec![self.region.to_string()],
            managed_tag: Some(("ebb:managed".to_string(), self.managed.clone())),
            max_attempts: 1,
            on_demand: ebb::cloud::prices::load(
                &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prices.yaml"),
            )
            .unwrap(),
            ..Settings::default()
        }
    }

    pub async fn provider(&self) -> AwsProvider {
        AwsProvider::connect(self.settings()).await.unwrap()
    }

    /// Launches one instance in a reservation of its own (moto pages DescribeInstances by
    /// reservation, EC2 by instance: one each makes them count alike) and returns its id.
    pub async fn launch(&self, what: Launch<'_>) -> String {
        launch_with(&self.ec2, &self.image, &self.managed, what).await
    }
}

/// The SDK configuration for `region` on the emulator; refuses to run against anything else.
pub async fn emulator(region: &str) -> SdkConfig {
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run scripts/test, which starts moto and sets it");
    assert!(
        endpoint.starts_with("http://127.0.0.1:"),
        "AWS_ENDPOINT_URL={endpoint} is not a local emulator; these tests change instances"
    );
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
        .load()
        .await
}

/// What to launch.
#[derive(Clone, Copy)]
pub struct Launch<'a> {
    pub instance_type: &'a str,
    pub managed: bool,
    pub spot: bool,
    pub hibernation: bool,
    /// Tags beside `ebb:managed`.
    pub tags: &'a [(&'a str, &'a str)],
}

/// A managed, on-demand g5.xlarge of team research.
pub const G5: Launch = Launch {
    instance_type: "g5.xlarge",
    managed: true,
    spot: false,
    hibernation: false,
    tags: &[("team", "research")],
};

/// Launches `what` with `ec2`, tagged `ebb:managed=<managed>` when it is managed.
pub async fn launch_with(
    ec2: &aws_sdk_ec2::Client,
    image: &str,
    managed: &str,
    what: Launch<'_>,
) -> String {
    let mut tags = TagSpecification::builder().resource_type(ResourceType::Instance);
    for (key, value) in what.tags {
        tags = tags.tags(Tag::builder().key(*key).value(*value).build());
    }
    if what.managed {
        tags = tags.tags(Tag::builder().key("ebb:managed").value(managed).build());
    }
    let mut request = ec2
        .run_instances()
        .image_id(image)
        .instance_type(InstanceType::from(what.instance_type))
        .min_count(1)
        .max_count(1)
        .tag_specifications(tags.build());
    if what.spot {
        request = request.instance_market_options(
            InstanceMarketOptionsRequest::builder()
                .market_type(MarketType::Spot)
                .build(),
        );
    }
    if what.hibernation {
        request = request.hibernation_options(
            HibernationOptionsRequest::builder()
                .configured(true)
                .build(),
        );
    }
    let out = request.send().await.unwrap();
    out.instances()[0].instance_id().unwrap().to_string()
}

/// The state of each instance, straight from EC2.
pub async fn states(
    ec2: &aws_sdk_ec2::Client,
    ids: &[String],
) -> BTreeMap<String, InstanceStateName> {
    let out = ec2
        .describe_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .send()
        .await
        .unwrap();
    out.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .map(|i| {
            (
                i.instance_id().unwrap().to_string(),
                i.state().unwrap().name().unwrap().clone(),
            )
        })
        .collect()
}

impl Fixture {
    /// Creates an Auto Scaling group `name` of `size` g5.xlarge members, with `tags` propagated
    /// to them at launch, and returns the members' ids: moto launches them as EC2 Auto Scaling
    /// does, each tagged `aws:autoscaling:groupName`. The SDK has no Auto Scaling client among
    /// ebb's dependencies, so the call is the Query API's form, which moto routes by the
    /// credential scope's service.
    pub async fn auto_scaling_group(
        &self,
        name: &str,
        size: u32,
        tags: &[(&str, &str)],
    ) -> Vec<String> {
        let template = self
            .ec2
            .create_launch_template()
            .launch_template_name(format!("{name}-template"))
            .launch_template_data(
                aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                    .image_id(&self.image)
                    .instance_type(InstanceType::G5Xlarge)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        let template = template
            .launch_template()
            .unwrap()
            .launch_template_id()
            .unwrap();
        let size = size.to_string();
        let zone = format!("{}a", self.region);
        let mut form: Vec<(String, String)> = [
            ("Action", "CreateAutoScalingGroup"),
            ("Version", "2011-01-01"),
            ("AutoScalingGroupName", name),
            ("LaunchTemplate.LaunchTemplateId", template),
            ("MinSize", &size),
            ("MaxSize", &size),
            ("DesiredCapacity", &size),
            ("AvailabilityZones.member.1", &zone),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (n, (key, value)) in tags.iter().enumerate() {
            let member = format!("Tags.member.{}", n + 1);
            form.push((format!("{member}.Key"), key.to_string()));
            form.push((format!("{member}.Value"), value.to_string()));
            form.push((format!("{member}.PropagateAtLaunch"), "true".into()));
        }
        let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
        let scope = format!(
            "Credential=test/20260101/{}/autoscaling/aws4_request",
            self.region
        );
        let answer = reqwest::Client::new()
            .post(&endpoint)
            .header(
                "Authorization",
                format!("AWS4-HMAC-SHA256 {scope}, SignedHeaders=host, Signature=0"),
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(&form))
            .send()
            .await
            .unwrap();
        let status = answer.status();
        assert!(
            status.is_success(),
            "{status}: {}",
            answer.text().await.unwrap()
        );
        let members = self
            .ec2
            .describe_instances()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("tag:aws:autoscaling:groupName")
                    .values(name)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        members
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| i.instance_id().unwrap().to_string())
            .collect()
    }
}

/// `pairs` as an `application/x-www-form-urlencoded` body.
fn form_body(pairs: &[(String, String)]) -> String {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The volume each snapshot of a CreateImage was taken from, as EC2 records it: moto snapshots
/// a scratch volume instead, so the instance is read from the description moto (like EC2)
/// gives the snapshot, "Created by CreateImage(i-...) for ami-...".
pub async fn source_volumes(
    ec2: &aws_sdk_ec2::Client,
    snapshots: &[String],
) -> BTreeMap<String, String> {
    let mut volumes = BTreeMap::new();
    for snapshot in snapshots {
        let out = ec2
            .describe_snapshots()
            .snapshot_ids(snapshot)
            .send()
            .await
            .unwrap();
        let description = out.snapshots()[0].description().unwrap_or("").to_string();
        let Some(instance) = description
            .strip_prefix("Created by CreateImage(")
            .and_then(|rest| rest.split(')').next())
        else {
            continue;
        };
        let found = ec2
            .describe_instances()
            .instance_ids(instance)
            .send()
            .await
            .unwrap();
        let root = found.reservations()[0].instances()[0]
            .block_device_mappings()
            .iter()
            .find_map(|m| m.ebs()?.volume_id().map(str::to_string));
        if let Some(volume) = root {
            volumes.insert(snapshot.clone(), volume);
        }
    }
    volumes
}
