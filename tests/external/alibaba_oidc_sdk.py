"""What Alibaba Cloud's official credentials SDK (alibabacloud_credentials) sends STS for RRSA
and reads from its answer: its OIDCRoleArnCredentialsProvider is run with TeaCore's sender
replaced, so that the request it builds is kept instead of sent, and the answer the fake gave
ebb is handed to it as STS's. Input (stdin, JSON): role_arn, provider_arn, token_file,
session_name, answer. Output (stdout, JSON): the query the SDK built, and the credentials it
read from the answer."""

import json
import sys

from Tea.core import TeaCore
from alibabacloud_credentials.provider.oidc import OIDCRoleArnCredentialsProvider

given = json.load(sys.stdin)
sent = {}


class _Answer:
    status_code = 200
    body = json.dumps(given["answer"]).encode("utf-8")


def _keep(request, runtime_option=None):
    sent["method"] = request.method
    sent["query"] = dict(request.query)
    return _Answer()


TeaCore.do_action = staticmethod(_keep)
provider = OIDCRoleArnCredentialsProvider(
    role_arn=given["role_arn"],
    oidc_provider_arn=given["provider_arn"],
    oidc_token_file_path=given["token_file"],
    role_session_name=given["session_name"],
)
credentials = provider.get_credentials()
json.dump(
    {
        "method": sent["method"],
        "query": sent["query"],
        "credentials": {
            "access_key_id": credentials.get_access_key_id(),
            "access_key_secret": credentials.get_access_key_secret(),
            "security_token": credentials.get_security_token(),
        },
    },
    sys.stdout,
)
