"""moto's server, with the EC2 behaviours ebb relies on that moto lacks.

CreateImage with a TagSpecification for `snapshot` tags the snapshots the call makes (EC2 does;
moto raises NotImplementedError). ebb tags its images' snapshots that way, because its IAM policy
lets it tag a snapshot only in the CreateImage call that makes it.

On-Demand Capacity Reservations (moto has none): CreateCapacityReservation (its client token
makes a repeated call the same reservation; its TagSpecifications tag it), DescribeCapacity-
Reservations, CancelCapacityReservation, ModifyInstanceCapacityReservationAttributes (only of a
stopped instance, and only to a reservation that exists and is active), and the instance's
CapacityReservationSpecification and, while it runs in an active reservation it targets, its
CapacityReservationId in DescribeInstances; a reservation's AvailableInstanceCount is its size
less the instances running in it.

RunInstances asking for a private IP address another instance holds is refused with EC2's
`InvalidIPAddress.InUse` (moto raises a bare Exception: a 500); a terminated instance's address
is free again, as on EC2; an instance launched without a subnet gets an address of its zone's
default subnet (moto gives it one outside every subnet); a public IPv4 address from Amazon's pool
is owned by `amazon` (moto names the account, as for an Elastic IP). Arguments are moto.server's.
"""

import datetime
import itertools

from moto.core.exceptions import ServiceException
from moto.core.responses import ActionResult, EmptyResult
from moto.ec2.models.amis import AmiBackend
from moto.ec2.models.elastic_network_interfaces import NetworkInterface
from moto.ec2.models.instances import Instance
from moto.ec2.models.subnets import Subnet
from moto.ec2.responses import EC2Response
from moto.server import main

_create_image = AmiBackend.create_image


def create_image(self, instance_id, name, description, tag_specifications):
    on_snapshots = [s for s in tag_specifications if s.get("ResourceType") == "snapshot"]
    rest = [s for s in tag_specifications if s.get("ResourceType") != "snapshot"]
    ami = _create_image(self, instance_id, name, description, tag_specifications=rest)
    for spec in on_snapshots:
        tags = {t["Key"]: t.get("Value", "") for t in spec.get("Tags", [])}
        self.create_tags([ami.ebs_snapshot.id], tags)
    return ami


AmiBackend.create_image = create_image

_request_ip = Subnet.request_ip


def request_ip(self, ip, instance):
    # EC2 frees a terminated instance's address (moto only when the object is collected), and
    # refuses a launch that asks for an address another box holds with this error (moto raises
    # a bare Exception, which its server answers with a 500).
    holder = self._subnet_ips.get(ip)
    if holder is not None:
        if getattr(getattr(holder, "_state", None), "name", None) != "terminated":
            raise _Refused("InvalidIPAddress.InUse", f"Address {ip} is in use.")
        del self._subnet_ips[ip]
    return _request_ip(self, ip, instance)


Subnet.request_ip = request_ip

_prep_nics = Instance.prep_nics


def prep_nics(self, nic_spec, private_ip=None, **kwargs):
    # EC2 gives an instance launched without a subnet an address of its zone's default subnet;
    # moto gives it a random one outside every subnet, which no later launch may ask for.
    if not self._subnet_id and private_ip is None and not nic_spec:
        subnet = self.ec2_backend.get_default_subnets().get(self._placement.zone)
        if subnet is not None:
            private_ip = subnet.get_available_subnet_ip(instance=self)
            self._private_ips.add(private_ip)
    return _prep_nics(self, nic_spec, private_ip=private_ip, **kwargs)


Instance.prep_nics = prep_nics

_association = NetworkInterface.association.fget


def association(self):
    # EC2 names Amazon as the owner of a public IPv4 address from its pool (`IpOwnerId`
    # `amazon`) and the account as the owner of an Elastic IP; moto names the account for both.
    found = _association(self)
    if found.get("publicIp") and not found.get("allocationId"):
        found["ipOwnerId"] = "amazon"
    return found


NetworkInterface.association = property(association)

# Reservations by (account, region), then id; ids count up.
_RESERVATIONS = {}
_IDS = itertools.count(1)


class _Refused(ServiceException):
    def __init__(self, code, message):
        super().__init__(code, message)


def _reservations(response):
    return _RESERVATIONS.setdefault((response.current_account, response.region), {})


def _public(r):
    return {k: v for k, v in r.items() if not k.startswith("_")}


def create_capacity_reservation(self):
    token = self._get_param("ClientToken")
    held = _reservations(self)
    for r in held.values():
        if token and r["_token"] == token:
            return ActionResult({"CapacityReservation": _public(r)})
    tags = []
    for spec in self._get_param("TagSpecifications", []):
        if spec.get("ResourceType") == "capacity-reservation":
            tags.extend({"Key": t["Key"], "Value": t.get("Value", "")} for t in spec.get("Tags", []))
    now = datetime.datetime.now(datetime.timezone.utc)
    rid = f"cr-{next(_IDS):017x}"
    r = {
        "CapacityReservationId": rid,
        "OwnerId": self.current_account,
        "InstanceType": self._get_param("InstanceType"),
        "InstancePlatform": self._get_param("InstancePlatform"),
        "AvailabilityZone": self._get_param("AvailabilityZone"),
        "Tenancy": self._get_param("Tenancy", "default"),
        "TotalInstanceCount": int(self._get_param("InstanceCount", 1)),
        "AvailableInstanceCount": int(self._get_param("InstanceCount", 1)),
        "InstanceMatchCriteria": self._get_param("InstanceMatchCriteria", "open"),
        "EndDateType": self._get_param("EndDateType", "unlimited"),
        "EndDate": self._get_param("EndDate"),
        "State": "active",
        "StartDate": now,
        "CreateDate": now,
        "Tags": tags,
        "_token": token,
    }
    held[rid] = r
    return ActionResult({"CapacityReservation": _public(r)})


def describe_capacity_reservations(self):
    wanted = set(self._get_param("CapacityReservationIds", []))
    running = [i.capacity_reservation_id for i in self.ec2_backend.all_instances()]
    found = []
    for rid, r in sorted(_reservations(self).items()):
        if wanted and rid not in wanted:
            continue
        answer = _public(r)
        if r["State"] == "active":
            answer["AvailableInstanceCount"] = max(0, r["TotalInstanceCount"] - running.count(rid))
        found.append(answer)
    return ActionResult({"CapacityReservations": found})


def cancel_capacity_reservation(self):
    rid = self._get_param("CapacityReservationId")
    r = _reservations(self).get(rid)
    if r is None:
        raise _Refused(
            "InvalidCapacityReservationId.NotFound",
            f"The capacity reservation ID '{rid}' does not exist",
        )
    if r["State"] != "active":
        raise _Refused(
            "IncorrectState", f"The capacity reservation '{rid}' is in state {r['State']}"
        )
    r["State"] = "cancelled"
    return ActionResult({"Return": True})


def modify_instance_capacity_reservation_attributes(self):
    instance = self.ec2_backend.get_instance(self._get_param("InstanceId"))
    spec = self._get_param("CapacityReservationSpecification", {})
    if instance.state != "stopped":
        raise _Refused(
            "IncorrectInstanceState",
            f"The instance '{instance.id}' is not in the 'stopped' state.",
        )
    target = (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")
    if target is not None:
        r = _reservations(self).get(target)
        if r is None or r["State"] != "active":
            raise _Refused(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{target}' does not exist or is not active",
            )
        instance._ebb_reservation = {"CapacityReservationTarget": {"CapacityReservationId": target}}
    else:
        preference = spec.get("CapacityReservationPreference", "open")
        instance._ebb_reservation = {"CapacityReservationPreference": preference}
    return ActionResult({"Return": True})


EC2Response.create_capacity_reservation = create_capacity_reservation
EC2Response.describe_capacity_reservations = describe_capacity_reservations
EC2Response.cancel_capacity_reservation = cancel_capacity_reservation
EC2Response.modify_instance_capacity_reservation_attributes = (
    modify_instance_capacity_reservation_attributes
)


def _running_in(instance):
    """The reservation a running instance targeted runs it, while that reservation is active."""
    spec = getattr(instance, "_ebb_reservation", {})
    target = (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")
    if target is None or instance.state != "running":
        return None
    for held in _RESERVATIONS.values():
        r = held.get(target)
        if r is not None and r["State"] == "active":
            return target
    return None


Instance.capacity_reservation_id = property(_running_in)
Instance.capacity_reservation_specification = property(
    lambda self: getattr(self, "_ebb_reservation", {"CapacityReservationPreference": "open"})
)

if __name__ == "__main__":
    main()
