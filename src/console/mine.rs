//! The fleet page's "my instances": for a login, the fleet filtered by its token's name as the
//! instances' `ebb:owner` tag (the addressee of their notices), through the page's tag filter.

use super::query_string;
use crate::names::OWNER_TAG;
use maud::{html, Markup};

/// The tag filter of the instances of the login named `name`: `ebb:owner=NAME`.
fn mine(name: &str) -> String {
    format!("{OWNER_TAG}={name}")
}

/// For a login named `name`, the link to its instances, or back to all when the page's tag
/// filter (`tag`) already shows them; nothing without a login.
pub(super) fn switch(name: Option<&str>, tag: Option<&str>) -> Markup {
    let Some(name) = name else {
        return html! {};
    };
    let mine = mine(name);
    html! {
        p.mine {
            @if tag == Some(mine.as_str()) {
                "Your instances: tagged " code { (mine) } ". " a href="/" { "All instances" }
            } @else {
                a href=(format!("/{}", query_string(&[("tag", Some(&mine))]))) { "My instances" }
                " (tagged " code { (mine) } ")"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_is_offered_its_instances_or_all_of_them() {
        assert_eq!(switch(None, None).into_string(), "");
        let offer = switch(Some("mei"), None).into_string();
        assert!(
            offer.contains(r#"href="/?tag=ebb%3Aowner%3Dmei""#),
            "{offer}"
        );
        let shown = switch(Some("mei"), Some("ebb:owner=mei")).into_string();
        assert!(shown.contains(r#"href="/""#), "{shown}");
        assert!(shown.contains("Your instances"), "{shown}");
    }
}
