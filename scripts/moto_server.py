"""moto's server, with the one EC2 behaviour ebb relies on that moto lacks.

CreateImage with a TagSpecification for `snapshot` tags the snapshots the call makes (EC2 does;
moto raises NotImplementedError). ebb tags its images' snapshots that way, because its IAM policy
lets it tag a snapshot only in the CreateImage call that makes it. Arguments are moto.server's.
"""

from moto.ec2.models.amis import AmiBackend
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

if __name__ == "__main__":
    main()
