//! A receiver for the events ebb posts to `EBB_EVENTS_URL`, told how to answer, and the shipped
//! schema (`deploy/events.schema.json`) to check what it received against.

use serde_json::Value;
use std::sync::{Arc, Mutex};

/// How the receiver answers a post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 200.
    Take,
    /// 500.
    Fail,
    /// Never: the post is kept (as received) but hangs until the sender gives up or dies.
    Hang,
}

/// What the receiver got, and how it answers.
#[derive(Debug)]
struct State {
    answer: Answer,
    /// Every post's body, parsed, its `Content-Type` and how it was answered, in the order they
    /// arrived.
    posts: Vec<Post>,
}

/// A post received.
#[derive(Debug, Clone)]
pub struct Post {
    /// The event.
    pub event: Value,
    /// Its `Content-Type`.
    pub content_type: String,
    /// How it was answered: only [`Answer::Take`] delivers it.
    pub answer: Answer,
}

/// A receiver on 127.0.0.1.
#[derive(Debug, Clone)]
pub struct Receiver {
    /// Its URL.
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl Receiver {
    /// Starts one that answers `answer`.
    pub async fn start(answer: Answer) -> Receiver {
        let state = Arc::new(Mutex::new(State {
            answer,
            posts: Vec::new(),
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/events", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .route("/events", axum::routing::post(take))
            .with_state(state.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, state }
    }

    /// Answers `answer` from now on: to the posts after the number returned, which it has
    /// received so far.
    pub fn answer(&self, answer: Answer) -> usize {
        let mut state = self.state.lock().unwrap();
        state.answer = answer;
        state.posts.len()
    }

    /// The events received so far, in order, redeliveries and those not taken included.
    pub fn events(&self) -> Vec<Value> {
        self.posts().into_iter().map(|post| post.event).collect()
    }

    /// The events answered with 200, in order.
    pub fn taken(&self) -> Vec<Value> {
        self.posts()
            .into_iter()
            .filter(|post| post.answer == Answer::Take)
            .map(|post| post.event)
            .collect()
    }

    /// The posts received so far.
    pub fn posts(&self) -> Vec<Post> {
        self.state.lock().unwrap().posts.clone()
    }
}

/// Keeps a post and answers it as told.
async fn take(
    axum::extract::State(state): axum::extract::State<Arc<Mutex<State>>>,
    headers: axum::http::HeaderMap,
    body: String,
) -> axum::http::StatusCode {
    let answer = {
        let mut state = state.lock().unwrap();
        let content_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let answer = state.answer;
        state.posts.push(Post {
            event: serde_json::from_str(&body).unwrap(),
            content_type,
            answer,
        });
        answer
    };
    match answer {
        Answer::Take => axum::http::StatusCode::OK,
        Answer::Fail => axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        Answer::Hang => std::future::pending().await,
    }
}

/// Why `event` does not fit `deploy/events.schema.json`, if it does not.
pub fn schema_problems(event: &Value) -> Option<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/events.schema.json");
    let mut schemas = boon::Schemas::new();
    let index = boon::Compiler::new()
        .compile(path.to_str().unwrap(), &mut schemas)
        .unwrap_or_else(|e| panic!("deploy/events.schema.json: {e:#}"));
    schemas
        .validate(event, index)
        .err()
        .map(|e| format!("{e:#}"))
}
