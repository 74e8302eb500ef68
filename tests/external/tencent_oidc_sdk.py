"""What Tencent Cloud's official Python SDK sends STS for TKE's pod identity and reads from its
answer: its OIDCRoleArnCredential is run with CommonClient's call replaced, so that the call it
builds is kept instead of sent, and the answer the fake gave ebb is handed to it as STS's.
Input (stdin, JSON): region, provider_id, token, role_arn, session_name, answer. Output
(stdout, JSON): the call the SDK built (service, version, region, action, params, whether
signed) and the keys it read from the answer."""

import json
import sys

from tencentcloud.common.common_client import CommonClient
from tencentcloud.common.credential import OIDCRoleArnCredential

given = json.load(sys.stdin)
sent = {}


def _keep(self, action, params, headers=None, options=None):
    sent.update(
        service=self._service,
        version=self._apiVersion,
        region=self.region,
        action=action,
        params=params,
        skip_sign=bool((options or {}).get("SkipSign")),
    )
    return given["answer"]


CommonClient.call_json = _keep
credential = OIDCRoleArnCredential(
    given["region"],
    given["provider_id"],
    given["token"],
    given["role_arn"],
    given["session_name"],
)
secret_id, secret_key, token = credential.get_credential_info()
json.dump({"call": sent, "keys": {"id": secret_id, "key": secret_key, "token": token}}, sys.stdout)
