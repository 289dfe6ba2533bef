"""The SNS topic every jobguard alarm notifies: KMS-encrypted and TLS only.

CloudWatch publishes an alarm's notification as the ``cloudwatch.amazonaws.com`` service,
so the topic's policy allows exactly that (for this account's alarms), and the topic's key
must let CloudWatch use it: the AWS managed ``alias/aws/sns`` key cannot (its policy
cannot be changed), so the topic is encrypted with a customer-managed key, rotated
yearly, made here unless one is given. Subscribe the on-call address or endpoint to it
after deploying (a subscription needs its owner's confirmation, so the stack makes none).

Example:
    >>> topic = AlarmTopic(stack, "Alarms")  # doctest: +SKIP
    >>> alarm.add_alarm_action(topic.action)  # doctest: +SKIP
"""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

__all__ = ["CLOUDWATCH", "AlarmTopic"]

CLOUDWATCH = "cloudwatch.amazonaws.com"


class AlarmTopic(Construct):
    """An encrypted, TLS-only topic that this account's CloudWatch alarms may publish to.

    Args:
        key: the customer-managed key to encrypt it with (one is created when not given;
            an imported key's policy must already let CloudWatch use it).
    """

    def __init__(self, scope: Construct, construct_id: str, *,
                 key: kms.IKey | None = None) -> None:
        super().__init__(scope, construct_id)
        if key is None:
            key = kms.Key(
                self, "Key", enable_key_rotation=True, removal_policy=RemovalPolicy.RETAIN,
                description="jobguard: encrypts the alarm topic (CloudWatch may use it)")
        self.key = key
        # no-op for an imported key: its own policy must allow this
        key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublishToTheEncryptedTopic",
            principals=[iam.ServicePrincipal(CLOUDWATCH)],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],  # in a key policy, "*" is this key
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
        ))
        self.topic = sns.Topic(
            self, "Topic", display_name="jobguard alarms", master_key=key, enforce_ssl=True)
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsOfThisAccount",
            principals=[iam.ServicePrincipal(CLOUDWATCH)],
            actions=["sns:Publish"],
            resources=[self.topic.topic_arn],
            conditions={
                "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                "ArnLike": {"aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:"
                                             f"{Aws.ACCOUNT_ID}:alarm:*"},
            },
        ))
        self.action = cw_actions.SnsAction(self.topic)
