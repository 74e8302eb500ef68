"""What Tencent Cloud's official Python SDK makes of the requests ebb sent to the fake of its API.

Reads {"secret": ..., "calls": [{"service", "action", "raw", "headers"}]} as JSON on stdin and
writes, as JSON on stdout, for each call:
- "authorization": the Authorization header the SDK's TC3 signer
  (tencentcloud.common.abstract_client.AbstractClient._get_tc3_signature) computes over the same
  body, content type, host, timestamp and service;
- "body": the call's body read into the SDK's request model of its action and written back
  (`_deserialize`, then `_serialize`), and "unknown": the fields the model does not define;
- "answer_unknown": for an answer the fake gave without refusing, what the SDK's response model
  of the action says of the fields it does not define, nested ones included (`_deserialize`'s
  warnings).
"""

import datetime
import importlib
import json
import sys
import warnings

from tencentcloud.common.abstract_client import AbstractClient
from tencentcloud.common.http.request import RequestInternal

VERSIONS = {"cvm": "v20170312", "tag": "v20180813", "monitor": "v20180724"}


def authorization(call, secret):
    headers = dict(call["headers"])
    request = RequestInternal(headers["host"], "POST", "/", header={
        "Content-Type": headers["content-type"],
        "Host": headers["host"],
        "X-TC-Timestamp": headers["x-tc-timestamp"],
    }, data=call["raw"])
    timestamp = int(headers["x-tc-timestamp"])
    date = datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).strftime("%Y-%m-%d")
    service = call["service"]
    signature = AbstractClient._get_tc3_signature(None, None, request, date, service, secret)
    key_id = headers["authorization"].split("Credential=", 1)[1].split("/", 1)[0]
    return ("TC3-HMAC-SHA256 Credential=%s/%s/%s/tc3_request, SignedHeaders=content-type;host, "
            "Signature=%s" % (key_id, date, service, signature))


def model_body(call):
    version = VERSIONS.get(call["service"])
    if version is None:
        return None, []
    models = importlib.import_module(f"tencentcloud.{call['service']}.{version}.models")
    request = getattr(models, call["action"] + "Request")()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        request._deserialize(json.loads(call["raw"]))
    return request._serialize(allow_none=False), [str(w.message) for w in caught]


def answer_unknown(call):
    version = VERSIONS.get(call["service"])
    if version is None or "Error" in call["answer"]["Response"]:
        return []
    models = importlib.import_module(f"tencentcloud.{call['service']}.{version}.models")
    response = getattr(models, call["action"] + "Response")()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        response._deserialize(call["answer"]["Response"])
    return [str(w.message) for w in caught]


def main():
    given = json.load(sys.stdin)
    out = []
    for call in given["calls"]:
        body, unknown = model_body(call)
        out.append({
            "authorization": authorization(call, given["secret"]),
            "body": body,
            "unknown": unknown,
            "answer_unknown": answer_unknown(call),
        })
    json.dump(out, sys.stdout)


main()
