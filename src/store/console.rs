//! Read queries for the web console: a page of the fleet, one instance's state changes, a page
//! of the audit log. They only read, each one statement bounded by its page.

use super::audit::{from_row, select_where, AuditFilter, Row};
use super::audit_entry::AuditEntry;
use super::inventory::{select_instances, InstanceRecord};
use super::{Result, Store};
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

/// Which live instances a fleet page shows (all given filters must hold), in which order.
#[derive(Debug, Clone, Default)]
pub struct FleetFilter {
    /// Governed by this policy at the last decision.
    pub policy: Option<String>,
    /// In this EC2 state.
    pub state: Option<String>,
    /// Carrying this tag with this value.
    pub tag: Option<(String, String)>,
    /// The order of the rows.
    pub sort: FleetSort,
}

/// What a fleet page is sorted by; the instance id breaks ties.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FleetSort {
    /// The instance id.
    #[default]
    Id,
    /// The instance type.
    Type,
    /// The region.
    Region,
    /// The state, then since when (longest first).
    State,
    /// The governing policy.
    Policy,
    /// The latest decision's action and code.
    Decision,
}

impl FleetSort {
    /// Every order, with its name in the page's query.
    pub const ALL: [(FleetSort, &'static str); 6] = [
        (FleetSort::Id, "id"),
        (FleetSort::Type, "type"),
        (FleetSort::Region, "region"),
        (FleetSort::State, "state"),
        (FleetSort::Policy, "policy"),
        (FleetSort::Decision, "decision"),
    ];

    /// The order named `name` in a query.
    pub fn parse(name: &str) -> Option<FleetSort> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(s, _)| *s)
    }

    /// Its name in a query.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(s, _)| *s == self)
            .map_or("id", |(_, n)| n)
    }

    /// Its `ORDER BY` clause (fixed text: no input reaches it).
    fn order_by(self) -> &'static str {
        match self {
            FleetSort::Id => " ORDER BY i.id",
            FleetSort::Type => " ORDER BY i.instance_type, i.id",
            FleetSort::Region => " ORDER BY i.region, i.id",
            FleetSort::State => " ORDER BY i.state, i.state_since, i.id",
            FleetSort::Policy => " ORDER BY i.policy NULLS LAST, i.id",
            FleetSort::Decision => " ORDER BY i.decided_action, i.decided_code, i.id",
        }
    }
}

/// One page of the fleet.
#[derive(Debug, Clone)]
pub struct FleetPage {
    /// The instances of the page, by id.
    pub instances: Vec<InstanceRecord>,
    /// How many live instances match the filter, on every page.
    pub total: i64,
    /// How many terminated instances the filter would match but the page leaves out: with no
    /// state asked for, a page shows the instances that still run or can run again.
    pub terminated_hidden: i64,
}

/// A change of an instance's state, as a sync observed it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InstanceEvent {
    /// When the sync saw it.
    pub at: DateTime<Utc>,
    /// The state before: an EC2 state, or `gone`.
    pub from_state: String,
    /// The state after: an EC2 state, or `gone`.
    pub to_state: String,
    /// `observed`, `reappeared` or `gone`.
    pub cause: String,
}

/// Appends the `WHERE` conditions of `filter` (its `policy` and `state`) to `q`.
///
/// A terminated instance is still listed by its cloud for a while; it is shown only when asked
/// for by its state.
fn push_fleet_filter(q: &mut QueryBuilder<sqlx::Postgres>, filter: &FleetFilter) {
    q.push(" WHERE i.gone_at IS NULL");
    if let Some(policy) = &filter.policy {
        q.push(" AND i.policy = ").push_bind(policy.clone());
    }
    match &filter.state {
        Some(state) => q.push(" AND i.state = ").push_bind(state.clone()),
        None => q.push(" AND i.state <> 'terminated'"),
    };
    if let Some((key, value)) = &filter.tag {
        q.push(" AND i.tags ->> ")
            .push_bind(key.clone())
            .push(" = ")
            .push_bind(value.clone());
    }
}

impl Store {
    /// The live instances matching `filter`, by id, `limit` of them after the first `offset`,
    /// and how many match in all.
    pub async fn fleet_page(
        &self,
        filter: &FleetFilter,
        offset: i64,
        limit: i64,
    ) -> Result<FleetPage> {
        let mut q = QueryBuilder::new(select_instances!());
        push_fleet_filter(&mut q, filter);
        q.push(filter.sort.order_by())
            .push(" LIMIT ")
            .push_bind(limit)
            .push(" OFFSET ")
            .push_bind(offset);
        let instances: Vec<InstanceRecord> = q.build_query_as().fetch_all(&self.pool).await?;
        let mut count = QueryBuilder::new("SELECT count(*) FROM instances i");
        push_fleet_filter(&mut count, filter);
        let total: i64 = count.build_query_scalar().fetch_one(&self.pool).await?;
        let terminated_hidden = match filter.state {
            Some(_) => 0,
            None => {
                let terminated = FleetFilter {
                    state: Some("terminated".to_string()),
                    ..filter.clone()
                };
                let mut count = QueryBuilder::new("SELECT count(*) FROM instances i");
                push_fleet_filter(&mut count, &terminated);
                count.build_query_scalar().fetch_one(&self.pool).await?
            }
        };
        Ok(FleetPage {
            instances,
            total,
            terminated_hidden,
        })
    }

    /// The policies and the states of the live instances, each sorted: what the fleet can be
    /// filtered by.
    pub async fn fleet_facets(&self) -> Result<(Vec<String>, Vec<String>)> {
        let policies = sqlx::query_scalar(
            "SELECT DISTINCT policy FROM instances
             WHERE gone_at IS NULL AND policy IS NOT NULL ORDER BY policy",
        )
        .fetch_all(&self.pool)
        .await?;
        let states = sqlx::query_scalar(
            "SELECT DISTINCT state FROM instances WHERE gone_at IS NULL ORDER BY state",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok((policies, states))
    }

    /// The instance `id`, live or gone, if the store knows it.
    pub async fn instance(&self, id: &str) -> Result<Option<InstanceRecord>> {
        Ok(
            sqlx::query_as(concat!(select_instances!(), " WHERE i.id = $1"))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// The newest `limit` state changes of instance `id`, newest first.
    pub async fn instance_events(&self, id: &str, limit: i64) -> Result<Vec<InstanceEvent>> {
        Ok(sqlx::query_as(
            "SELECT at, from_state, to_state, cause FROM instance_events
             WHERE instance = $1 ORDER BY at DESC, id DESC LIMIT $2",
        )
        .bind(id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The newest `limit` audit rows matching `filter` (its `limit` aside) with a `seq` below
    /// `before` when given, newest first: one page of the log, and `before` the cursor of the
    /// next.
    pub async fn audit_page(
        &self,
        filter: &AuditFilter,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<AuditEntry>> {
        let mut q = select_where(filter);
        if let Some(seq) = before {
            q.push(" AND seq < ").push_bind(seq);
        }
        q.push(" ORDER BY seq DESC LIMIT ").push_bind(limit);
        let rows: Vec<Row> = q.build_query_as().fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(from_row).collect())
    }
}
