//! Notices to people: a JSON POST to `EBB_WEBHOOK_URL`, in the shape `EBB_WEBHOOK_FORMAT`
//! says: `{"text": ...}` (the default, which Slack's and Mattermost's incoming webhooks take),
//! Slack's Block Kit (the text with a notice's snooze links as buttons), or the text messages
//! of Feishu (Lark), DingTalk and WeCom (企业微信) bots, whose hooks take no `{"text"}` and
//! answer 200 with an error code in the body when they refuse a message.
//!
//! Posting happens on a task of its own, with retries, so a slow or failing receiver never
//! holds up a tick; the tag `ebb:stop-at` on the instance is the notice of record. Each notice
//! posted is one activation of the `webhook_sender` task in `GET /v1/status`.

use crate::control::Tasks;
use serde::Serialize;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Notices waiting to be posted; beyond this, new ones are dropped (and logged).
const QUEUE: usize = 1000;
/// Attempts per notice.
const ATTEMPTS: u32 = 4;
/// Time allowed for one attempt.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The wait before the second attempt, doubled before each further one.
const BACKOFF: Duration = Duration::from_secs(1);
/// The task's name in the statuses.
const TASK: &str = "webhook_sender";

/// A notice delivered: the `webhook_sender` task's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Posted {
    /// The attempt that delivered it, from 1.
    pub attempt: u32,
}

impl std::fmt::Display for Posted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "notice posted")
    }
}

/// Why a notice was not delivered. Never holds the URL, which is a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not delivered after {attempts} attempts: {last}")]
pub struct NotDelivered {
    /// Attempts made.
    pub attempts: u32,
    /// What the last attempt got: an HTTP status, or the error without the URL.
    pub last: String,
}

/// The shape of the posts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// `{"text": ...}`, the links written into the text.
    #[default]
    Plain,
    /// Slack's Block Kit: the text in a section, the links as buttons, and `text` as the
    /// fallback of notifications.
    Slack,
    /// A Feishu (Lark) custom bot's text message: `{"msg_type": "text", "content": {"text"}}`.
    Feishu,
    /// A DingTalk custom robot's text message: `{"msgtype": "text", "text": {"content"}}`.
    Dingtalk,
    /// A WeCom (企业微信) group robot's text message: `{"msgtype": "text", "text":
    /// {"content"}}`, at most [`WECOM_BYTES`].
    Wecom,
}

/// The most a WeCom text message holds, in bytes of UTF-8.
const WECOM_BYTES: usize = 2048;

/// A link a notice offers: a button in Block Kit, a labelled URL in the text otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    /// What it does, after "Keep it running": "for 2 hours".
    pub label: String,
    /// Where it goes.
    pub url: String,
}

/// One post: its text, and the links it offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// For people.
    pub text: String,
    /// Links to offer after the text.
    pub buttons: Vec<Button>,
}

impl Message {
    /// The JSON body of this message in `format`.
    pub fn body(&self, format: Format) -> serde_json::Value {
        let offers: Vec<String> = self
            .buttons
            .iter()
            .map(|b| format!("{}: {}", b.label, b.url))
            .collect();
        // The text carries tag values anyone can set (`ebb:owner`): escaped for the receiver,
        // so that no `<!channel>`, `<url|label>` or `<at user_id="all">` in one is markup.
        let escaped = match format {
            Format::Plain | Format::Slack => slack_escaped(&self.text),
            Format::Feishu => feishu_escaped(&self.text),
            Format::Dingtalk | Format::Wecom => self.text.clone(),
        };
        let links = match offers.is_empty() {
            true => String::new(),
            false => format!(" Keep it running {}", offers.join(" · ")),
        };
        let text = match format {
            // Cut the words, never the links, to fit.
            Format::Wecom => format!(
                "{}{links}",
                cut_to(&escaped, WECOM_BYTES.saturating_sub(links.len()))
            ),
            _ => format!("{escaped}{links}"),
        };
        match format {
            Format::Plain => return serde_json::json!({ "text": text }),
            Format::Feishu => {
                return serde_json::json!({ "msg_type": "text", "content": {"text": text} })
            }
            Format::Dingtalk | Format::Wecom => {
                return serde_json::json!({ "msgtype": "text", "text": {"content": text} })
            }
            Format::Slack => {}
        }
        let mut blocks = vec![serde_json::json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": escaped},
        })];
        if !self.buttons.is_empty() {
            let buttons: Vec<serde_json::Value> = self
                .buttons
                .iter()
                .map(|b| {
                    serde_json::json!({
                        "type": "button",
                        "text": {"type": "plain_text", "text": format!("Keep it running {}", b.label)},
                        "url": b.url,
                    })
                })
                .collect();
            blocks.push(serde_json::json!({"type": "actions", "elements": buttons}));
        }
        serde_json::json!({ "text": text, "blocks": blocks })
    }
}

/// `text` in at most `bytes` bytes: cut at a character, and marked with "…" where it was.
fn cut_to(text: &str, bytes: usize) -> String {
    if text.len() <= bytes {
        return text.to_string();
    }
    let mut end = bytes.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Why a chat bot refused a message it answered 200 to: DingTalk and WeCom answer a nonzero
/// `errcode` (a missing keyword, a message too long, too many messages), Feishu a nonzero
/// `code` (or `StatusCode`). `None` for the other formats, and for an answer that says
/// nothing of it.
fn refused(format: Format, answer: &serde_json::Value) -> Option<String> {
    let (code, message) = match format {
        Format::Dingtalk | Format::Wecom => (answer.get("errcode"), answer.get("errmsg")),
        Format::Feishu => (
            answer.get("code").or_else(|| answer.get("StatusCode")),
            answer.get("msg").or_else(|| answer.get("StatusMessage")),
        ),
        Format::Plain | Format::Slack => return None,
    };
    let code = code?.as_i64()?;
    let message = message.and_then(serde_json::Value::as_str).unwrap_or("");
    (code != 0).then(|| format!("refused by the receiver: code {code}: {message}"))
}

/// A client for posting to a receiver people configured (the webhook, the events endpoint):
/// it follows no redirect, since one would re-post a notice and its signed snooze links to
/// another host; a redirect is an answer that did not deliver.
pub(crate) fn outbound_client(timeout: Duration) -> reqwest::Client {
    let builder = || reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    builder()
        .timeout(timeout)
        .build()
        .or_else(|_| builder().build())
        .unwrap_or_default()
}

/// `text` as a Feishu text message shows it and reads no tag (`<at ...>`) in it: its angle
/// brackets as the full-width ones, which Feishu has no escape for otherwise.
fn feishu_escaped(text: &str) -> String {
    text.replace('<', "＜").replace('>', "＞")
}

/// `text` with the three characters Slack's mrkdwn reads as markup escaped (Slack's and
/// Mattermost's incoming webhooks read the plain `{"text"}` as mrkdwn too).
fn slack_escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The sending side of the webhook; clones share one queue.
#[derive(Debug, Clone)]
pub struct Webhook {
    queue: mpsc::Sender<Message>,
}

/// The posting task; [`Poster::finish`] waits for the queue to drain.
#[derive(Debug)]
pub struct Poster {
    task: JoinHandle<()>,
}

impl Webhook {
    /// Starts posting to `url` in the plain format, reporting each notice into `tasks`.
    pub fn start(url: reqwest::Url, tasks: Tasks) -> (Webhook, Poster) {
        Webhook::start_as(url, Format::Plain, tasks)
    }

    /// Starts posting to `url` in `format`, reporting each notice into `tasks`.
    pub fn start_as(url: reqwest::Url, format: Format, tasks: Tasks) -> (Webhook, Poster) {
        let (queue, mut notices) = mpsc::channel::<Message>(QUEUE);
        let client = outbound_client(TIMEOUT);
        tasks.register(TASK, "posts notices of coming stops to EBB_WEBHOOK_URL");
        let task = tokio::spawn(async move {
            while let Some(message) = notices.recv().await {
                tasks.started(TASK);
                let result = post(&client, &url, format, &message.body(format)).await;
                if let Err(err) = &result {
                    tracing::error!(task = TASK, error = %err, "background task failed");
                }
                tasks.finished(TASK, result.as_ref());
            }
        });
        (Webhook { queue }, Poster { task })
    }

    /// Queues a notice of `text` alone; never waits.
    pub fn send(&self, text: String) {
        self.send_message(Message {
            text,
            buttons: Vec::new(),
        });
    }

    /// Queues `message`; never waits.
    pub fn send_message(&self, mut message: Message) {
        // Its text may quote a cloud's or a read's error; the chat it goes to is no place for
        // a key or a token. The buttons carry ebb's own signed links, kept whole.
        message.text = crate::cloud::redact_secrets(&message.text);
        if let Err(err) = self.queue.try_send(message) {
            tracing::error!(error = %err, "webhook notice dropped");
        }
    }
}

impl Poster {
    /// Waits up to `limit` for queued notices to be posted, once every [`Webhook`] is dropped.
    pub async fn finish(self, limit: Duration) {
        if tokio::time::timeout(limit, self.task).await.is_err() {
            tracing::error!(
                waited = %humantime::format_duration(limit),
                "webhook notices still unsent; giving up on them"
            );
        }
    }
}

/// Posts one notice's `body` in `format`, with retries; why it was not delivered, if it was
/// not.
async fn post(
    client: &reqwest::Client,
    url: &reqwest::Url,
    format: Format,
    body: &serde_json::Value,
) -> Result<Posted, NotDelivered> {
    let mut wait = BACKOFF;
    let mut attempt = 1;
    loop {
        let answer = client.post(url.clone()).json(body).send().await;
        let error = match answer {
            Ok(r) if r.status().is_success() => {
                let said = r.json::<serde_json::Value>().await.unwrap_or_default();
                match refused(format, &said) {
                    Some(why) => why,
                    None => return Ok(Posted { attempt }),
                }
            }
            Ok(r) => format!("HTTP {}", r.status()),
            // The URL is a secret (it lets anyone post to the channel): never in the logs.
            Err(e) => e.without_url().to_string(),
        };
        if attempt == ATTEMPTS {
            return Err(NotDelivered {
                attempts: ATTEMPTS,
                last: error,
            });
        }
        tracing::warn!(attempt, error = %error, "webhook notice failed, retrying");
        tokio::time::sleep(wait).await;
        wait *= 2;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_failed_post_never_tells_the_url() {
        // A closed port: every attempt fails at once; the back-off runs on the paused clock.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url: reqwest::Url = format!("http://127.0.0.1:{port}/services/T0/B0/s3cr3t-path")
            .parse()
            .unwrap();
        let client = reqwest::Client::new();
        let body = serde_json::json!({"text": "a notice"});
        let error = post(&client, &url, Format::Plain, &body)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("not delivered after 4 attempts"),
            "{error}"
        );
        assert!(
            !error.contains("s3cr3t") && !error.contains("127.0.0.1"),
            "{error}"
        );
    }

    /// A receiver on a local port that answers every post 200 with `answer`: its URL.
    async fn answering(answer: &'static str) -> reqwest::Url {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let receiver = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let here = receiver.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = receiver.accept().await {
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        });
        format!("http://{here}/hook").parse().unwrap()
    }

    /// DingTalk, WeCom and Feishu answer 200 when they refuse a message (a keyword missing,
    /// too many messages), with the reason in the body: not delivered, and the status says
    /// why. A plain receiver's 200 is delivery, whatever its body.
    #[tokio::test(start_paused = true)]
    async fn a_chat_bots_refusal_in_a_200_is_not_delivered() {
        let client = outbound_client(TIMEOUT);
        let body = serde_json::json!({"msgtype": "text", "text": {"content": "a notice"}});
        let keyword = answering(r#"{"errcode":310000,"errmsg":"keywords not in content"}"#).await;
        for format in [Format::Dingtalk, Format::Wecom] {
            let error = post(&client, &keyword, format, &body).await.unwrap_err();
            assert_eq!(error.attempts, 4);
            assert_eq!(
                error.last,
                "refused by the receiver: code 310000: keywords not in content"
            );
        }
        assert!(post(&client, &keyword, Format::Plain, &body).await.is_ok());
        let feishu = answering(r#"{"code":19024,"msg":"Key Words Not Found"}"#).await;
        let error = post(&client, &feishu, Format::Feishu, &body)
            .await
            .unwrap_err();
        assert_eq!(
            error.last,
            "refused by the receiver: code 19024: Key Words Not Found"
        );
        let ok = answering(r#"{"errcode":0,"errmsg":"ok"}"#).await;
        assert_eq!(
            post(&client, &ok, Format::Wecom, &body).await,
            Ok(Posted { attempt: 1 })
        );
    }

    /// A WeCom message is a text message like DingTalk's, cut to 2,048 bytes at a character
    /// with its links whole.
    #[test]
    fn a_wecom_message_fits_its_limit_with_its_links_whole() {
        let message = Message {
            text: "停机通知 ".repeat(400),
            buttons: vec![Button {
                label: "for 2 hours".into(),
                url: "https://ebb.example/snooze/a".into(),
            }],
        };
        let body = message.body(Format::Wecom);
        assert_eq!(body["msgtype"], "text");
        let content = body["text"]["content"].as_str().unwrap();
        assert!(content.len() <= WECOM_BYTES, "{}", content.len());
        assert!(
            content.ends_with("… Keep it running for 2 hours: https://ebb.example/snooze/a"),
            "{content}"
        );
        let short = Message {
            text: "ebb will stop i-0a <soon>".into(),
            buttons: Vec::new(),
        };
        assert_eq!(
            short.body(Format::Wecom),
            serde_json::json!({"msgtype": "text", "text": {"content": "ebb will stop i-0a <soon>"}})
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_redirect_is_not_followed_and_the_notice_is_not_delivered() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // Another host, which must never see the notice.
        let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let there = elsewhere.local_addr().unwrap();
        let reached = tokio::spawn(async move { elsewhere.accept().await.is_ok() });
        // The receiver answers every post with a redirect there.
        let receiver = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let here = receiver.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = receiver.accept().await {
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head).await;
                let answer = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://{there}/hook\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        let url: reqwest::Url = format!("http://{here}/hook").parse().unwrap();
        let body = serde_json::json!({"text": "a notice"});
        let error = post(&outbound_client(TIMEOUT), &url, Format::Plain, &body)
            .await
            .unwrap_err();
        assert_eq!(error.last, "HTTP 307 Temporary Redirect", "{error}");
        assert!(!reached.is_finished(), "the redirect was followed");
        reached.abort();
    }

    #[test]
    fn markup_in_a_tag_value_reaches_no_receiver_as_markup() {
        // An owner tag set to ping everyone and to offer a false link.
        let message = Message {
            text: "ebb will stop i-0a of <!channel> <https://evil.example|Keep it running> <at user_id=\"all\">x</at>".into(),
            buttons: Vec::new(),
        };
        for format in [Format::Plain, Format::Slack] {
            let body = message.body(format);
            let text = body["text"].as_str().unwrap();
            assert!(!text.contains('<') && !text.contains('>'), "{text}");
            assert!(text.contains("&lt;!channel&gt;"), "{text}");
        }
        let slack = message.body(Format::Slack);
        let section = slack["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(!section.contains('<'), "{section}");
        let feishu = message.body(Format::Feishu);
        let text = feishu["content"]["text"].as_str().unwrap();
        assert!(!text.contains("<at"), "{text}");
    }

    #[test]
    fn a_notice_is_plain_text_slack_blocks_with_buttons_or_a_chat_bots_text_message() {
        let message = Message {
            text: "ebb will stop i-0a <soon> & then".into(),
            buttons: vec![
                Button {
                    label: "for 2 hours".into(),
                    url: "https://ebb.example/snooze/a".into(),
                },
                Button {
                    label: "for a day".into(),
                    url: "https://ebb.example/snooze/b".into(),
                },
            ],
        };
        let links = "Keep it running for 2 hours: https://ebb.example/snooze/a · for a day: https://ebb.example/snooze/b";
        let text = format!("ebb will stop i-0a &lt;soon&gt; &amp; then {links}");
        assert_eq!(
            message.body(Format::Plain),
            serde_json::json!({ "text": text })
        );
        let slack = message.body(Format::Slack);
        assert_eq!(slack["text"], text, "the notifications' fallback");
        assert_eq!(
            slack["blocks"][0]["text"]["text"],
            "ebb will stop i-0a &lt;soon&gt; &amp; then"
        );
        let buttons = &slack["blocks"][1]["elements"];
        assert_eq!(buttons[0]["type"], "button");
        assert_eq!(buttons[0]["text"]["text"], "Keep it running for 2 hours");
        assert_eq!(buttons[1]["url"], "https://ebb.example/snooze/b");
        let feishu = format!("ebb will stop i-0a ＜soon＞ & then {links}");
        assert_eq!(
            message.body(Format::Feishu),
            serde_json::json!({"msg_type": "text", "content": {"text": feishu}})
        );
        let dingtalk = format!("ebb will stop i-0a <soon> & then {links}");
        assert_eq!(
            message.body(Format::Dingtalk),
            serde_json::json!({"msgtype": "text", "text": {"content": dingtalk}})
        );
        let alone = Message {
            text: "plain".into(),
            buttons: Vec::new(),
        };
        assert_eq!(
            alone.body(Format::Plain),
            serde_json::json!({"text": "plain"})
        );
        assert_eq!(
            alone.body(Format::Slack)["blocks"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
}
