"""What Alibaba Cloud's official Python SDK makes of the requests ebb sent to the fake of ECS.

Reads {"secret": ..., "calls": [{"action", "params", "headers"}], "models": {...}} as JSON on
stdin and writes, as JSON on stdout:
- "authorizations": for each call, the Authorization header the SDK's signer
  (alibabacloud_tea_openapi.utils.Utils.get_authorization) computes over the same method, path,
  query, signed headers (those the call's own Authorization names) and payload hash;
- "params": for each action in "models", the query the SDK's request model of that action
  (alibabacloud_ecs20140526.models, or alibabacloud_cms20190101.models for CloudMonitor's
  DescribeMetricList) flattens to, from the keyword arguments given;
- "answer_unknown": for each accepted call's answer, the fields (as paths) that do not survive
  a round trip through the SDK's response body model of its action (`from_map`, then
  `to_map`): those the model does not define, nested ones included.
"""

import json
import sys

from alibabacloud_cms20190101 import models as cms_models
from alibabacloud_ecs20140526 import models
from alibabacloud_tea_openapi.utils import Utils
from Tea.request import TeaRequest


def authorization(call, secret):
    headers = dict(call["headers"])
    sent = headers["authorization"]
    fields = dict(part.split("=", 1) for part in sent.split(" ", 1)[1].split(","))
    request = TeaRequest()
    request.method = "POST"
    request.pathname = "/"
    request.query = call["params"]
    request.headers = {name: headers[name] for name in fields["SignedHeaders"].split(";")}
    key_id = fields["Credential"]
    payload = headers["x-acs-content-sha256"]
    return Utils.get_authorization(request, "ACS3-HMAC-SHA256", payload, key_id, secret)


def model_query(action, arguments):
    """The query the SDK's model of `action` flattens to; the dicts of a `tag` argument become
    the action's tag sub-models."""
    kwargs = {}
    for name, value in arguments.items():
        if name == "tag":
            tag = getattr(models, f"{action}RequestTag")
            value = [tag(**t) for t in value]
        kwargs[name] = value
    product = cms_models if action == "DescribeMetricList" else models
    request = getattr(product, f"{action}Request")(**kwargs)
    return Utils.query(request.to_map())


def paths(value, prefix=""):
    """Every key path of `value`, list items under `[]`."""
    if isinstance(value, dict):
        out = set()
        for key, item in value.items():
            out.add(prefix + key)
            out |= paths(item, prefix + key + ".")
        return out
    if isinstance(value, list):
        out = set()
        for item in value:
            out |= paths(item, prefix + "[].")
        return out
    return set()


def answer_unknown(call):
    if not call["accepted"]:
        return []
    product = cms_models if call["action"] == "DescribeMetricList" else models
    body = getattr(product, call["action"] + "ResponseBody")()
    body.from_map(call["answer"])
    return sorted(paths(call["answer"]) - paths(body.to_map()))


def main():
    given = json.load(sys.stdin)
    out = {
        "authorizations": [authorization(c, given["secret"]) for c in given["calls"]],
        "params": {a: model_query(a, kw) for a, kw in given["models"].items()},
        "answer_unknown": {c["action"]: answer_unknown(c) for c in given["calls"]},
    }
    json.dump(out, sys.stdout)


main()
