#!/usr/bin/env python3
"""The chart's alert rules (templates/prometheusrule.yaml, README "Alerts"), checked by Prometheus's own tool.

Rendered with the chart's defaults through Helm (test_chart.py's rendering, helm-python-sdk), then:
- `promtool check rules`: the rules parse and their PromQL is valid;
- `promtool test rules`: for every alert, series that should page make it fire (with its labels and the numbers
  in its annotations), and a healthy series and a short blip leave it silent.

Debian 12's `prometheus` package provides promtool (`make test` installs it).

    python Tests/chart/test_alerts.py            # prints "N passed, N failed" last; exits 1 on any failure
    python Tests/chart/test_alerts.py --render OUT [VALUES_JSON]   # writes the rule groups (for other tests)
"""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# The chart's rendering and its tooling's import check are test_chart.py's (importing it runs no test).
from test_chart import REQUIRED, ROOT, merge, render, yaml  # noqa: E402

PROMTOOL = shutil.which("promtool")


def rule_groups(values: dict | None = None) -> list[dict]:
    """The PrometheusRule's groups, rendered with the alerts on and `values` on top."""
    values = merge(merge(REQUIRED, {"metrics": {"prometheusRule": {"enabled": True}}}), values or {})
    rule = yaml.safe_load(render(values)["apns-relay/templates/prometheusrule.yaml"])
    assert rule["kind"] == "PrometheusRule", rule
    return rule["spec"]["groups"]


def write_rules(path: pathlib.Path, values: dict | None = None) -> None:
    path.write_text(yaml.safe_dump({"groups": rule_groups(values)}, sort_keys=False))


# --- the unit tests: one entry per alert ---------------------------------------------------------------------

REPLICA = 'job="push-apns-relay",namespace="messaging",instance="10.0.0.7:9090"'
OTHER_REPLICA = 'job="push-apns-relay",namespace="messaging",instance="10.0.0.8:9090"'
POOL = REPLICA + ',credential="acme",environment="production"'
GROUP = {"job": "push-apns-relay", "namespace": "messaging"}
RUNBOOK = "README.md#"


def case(alert: str, fire: list[str], fire_at: str, labels: dict, annotations: dict[str, str],
         healthy: list[str], blip: list[str], quiet_at: list[str]) -> dict:
    """A promtool test group: `fire` series make `alert` fire at `fire_at` (and not before its `for`); the
    `healthy` and `blip` series leave it silent at every time in `quiet_at`."""
    def series(lines: list[str]) -> list[dict]:
        return [{"series": line.split(" ", 1)[0], "values": line.split(" ", 1)[1]} for line in lines]
    labels = {**labels, "severity": labels.get("severity", "critical")}
    annotations = {**annotations, "runbook_url": RUNBOOK + alert.lower()}
    return [
        {"interval": "1m", "input_series": series(fire),
         "alert_rule_test": [{"eval_time": fire_at, "alertname": alert,
                              "exp_alerts": [{"exp_labels": labels, "exp_annotations": annotations}]}]},
        {"interval": "1m", "input_series": series(healthy),
         "alert_rule_test": [{"eval_time": t, "alertname": alert, "exp_alerts": []} for t in quiet_at]},
        {"interval": "1m", "input_series": series(blip),
         "alert_rule_test": [{"eval_time": t, "alertname": alert, "exp_alerts": []} for t in quiet_at]},
    ]


FLEET_DOWN = {
    "summary": "No replica of apns-relay push-apns-relay is up and ready",
    "description": "No replica of push-apns-relay has been both scraped and ready for a while (or none is scraped at all): "
                   "nothing is consumed or delivered, and events wait in Kafka."}
SIGNING_KEY_REFUSED = {
    "summary": "A new APNs signing key of credential acme was refused",
    "description": "A changed signing key of credential acme was refused (its file unreadable, or not an EC P-256 key) "
                   "within the last 1h, and no key has been taken since: push-apns-relay still signs with the previous "
                   "key, and once Apple revokes it every push of the credential fails."}
PRODUCER_FENCED = {
    "summary": "apns-relay 10.0.0.7:9090 was fenced: another producer took its transactional id",
    "description": "The transactional producer of 10.0.0.7:9090 was fenced within the last 30m: another process "
                   "registered its kafka.transactionalId (a pod thought gone that still runs, or another release with "
                   "the same group id and pod names). The fenced replica stopped and restarts; nothing is lost, but "
                   "two owners of one id go on fencing each other."}

CASES = {
    # 1/s refusals for half an hour; healthy: 200s only; blip: 10 refusals at once (a key rotation's
    # ExpiredProviderToken), under 0.05/s over 5 minutes.
    "APNsRelayCredentialRefused": case(
        "APNsRelayCredentialRefused",
        fire=[f'apns_client_responses_total{{{POOL},status="403",reason="BadEnvironmentKeyInToken"}} 0+60x40'],
        fire_at="20m",
        labels={**GROUP, "credential": "acme", "environment": "production"},
        annotations={
            "summary": "APNs refuses credential acme in production",
            "description": "APNs answers the pushes of credential acme in production with the provider-token, certificate or "
                           "key-scope family of 403s (InvalidProviderToken, BadEnvironmentKeyInToken, …): 1 a second over 5 minutes "
                           "(1 when the gauge apns_client_credential_refused says so at low traffic). Its pushes are not delivered."},
        healthy=[f'apns_client_responses_total{{{POOL},status="200",reason=""}} 0+6000x40',
                 f'apns_client_responses_total{{{POOL},status="403",reason="InvalidProviderToken"}} 0x40',
                 f'apns_client_credential_refused{{{POOL}}} 0x40'],
        blip=[f'apns_client_responses_total{{{POOL},status="403",reason="ExpiredProviderToken"}} 0x5 10x35',
              f'apns_client_credential_refused{{{POOL}}} 0x5 1 0x34'],
        quiet_at=["3m", "8m", "20m"]),
    # A credential with little traffic: 2 refusals a minute (under the rate), but the gauge says it is refused.
    "APNsRelayCredentialRefused, low traffic": case(
        "APNsRelayCredentialRefused",
        fire=[f'apns_client_responses_total{{{POOL},status="403",reason="InvalidProviderToken"}} 0+2x40',
              f'apns_client_credential_refused{{{POOL}}} 1x40'],
        fire_at="20m",
        labels={**GROUP, "credential": "acme", "environment": "production"},
        annotations={
            "summary": "APNs refuses credential acme in production",
            "description": "APNs answers the pushes of credential acme in production with the provider-token, certificate or "
                           "key-scope family of 403s (InvalidProviderToken, BadEnvironmentKeyInToken, …): 1 a second over 5 minutes "
                           "(1 when the gauge apns_client_credential_refused says so at low traffic). Its pushes are not delivered."},
        healthy=[f'apns_client_credential_refused{{{POOL}}} 0x40'],
        blip=[f'apns_client_credential_refused{{{POOL}}} 0x10 1 0x29'],
        quiet_at=["5m", "15m"]),
    # 5000 events wait and no result comes for 20 minutes; healthy: results flow; blip: results stop for 5
    # minutes (a rebalance, a short Kafka outage) and resume.
    "APNsRelayNoProgress": case(
        "APNsRelayNoProgress",
        fire=[f'apns_relay_consumer_lag{{{REPLICA},topic="apns-notifications",partition="0"}} 5000x30',
              f'apns_relay_results_total{{{REPLICA},outcome="delivered",reason=""}} 100x30'],
        fire_at="20m",
        labels=GROUP,
        annotations={
            "summary": "apns-relay publishes no results while 5000 events wait in Kafka",
            "description": "The consumer group of push-apns-relay has 5000 events of lag and has published no results for a "
                           "while: the pods may look healthy, but nothing moves."},
        healthy=[f'apns_relay_consumer_lag{{{REPLICA},topic="apns-notifications",partition="0"}} 200x30',
                 f'apns_relay_results_total{{{REPLICA},outcome="delivered",reason=""}} 0+6000x30'],
        blip=[f'apns_relay_consumer_lag{{{REPLICA},topic="apns-notifications",partition="0"}} 5000x30',
              f'apns_relay_results_total{{{REPLICA},outcome="delivered",reason=""}} 0+6000x10 60000x5 60000+6000x15'],
        quiet_at=["5m", "15m", "20m", "25m"]),
    # Kafka refuses 1 result a second; healthy: no failure; blip: 3 minutes of failures (a broker restart).
    "APNsRelayResultsNotPublished": case(
        "APNsRelayResultsNotPublished",
        fire=[f'apns_relay_producer_delivery_failures_total{{{REPLICA}}} 0+60x30'],
        fire_at="20m",
        labels={**GROUP, "instance": "10.0.0.7:9090"},
        annotations={
            "summary": "apns-relay 10.0.0.7:9090 cannot get its results into Kafka",
            "description": "Kafka refuses the results of 10.0.0.7:9090 (1 delivery failures a second), or its in-flight budget "
                           "is full with no result published: offsets do not move and events will be redone."},
        healthy=[f'apns_relay_producer_delivery_failures_total{{{REPLICA}}} 0x30',
                 f'apns_relay_lane_intake_held{{{REPLICA},lane="bulk"}} 0x30',
                 f'apns_relay_results_total{{{REPLICA},outcome="delivered",reason=""}} 0+6000x30'],
        blip=[f'apns_relay_producer_delivery_failures_total{{{REPLICA}}} 0+60x3 180x27'],
        quiet_at=["5m", "15m", "25m"]),
    # The guard trips and stays tripped; healthy: 0; blip: one sample of 1.
    "APNsRelayTokenRemovalGuardTripped": case(
        "APNsRelayTokenRemovalGuardTripped",
        fire=[f'apns_relay_token_removal_guard_tripped{{{POOL}}} 0 1x10'],
        fire_at="5m",
        labels={**GROUP, "credential": "acme", "environment": "production", "severity": "warning"},
        annotations={
            "summary": "Most pushes of credential acme in production answer BadDeviceToken",
            "description": "The token-removal guard withholds removed-token (or removed-channel) records for credential acme in "
                           "production: that many bad tokens point at a misconfiguration (wrong environment, another app's "
                           "credential), not at users leaving."},
        healthy=[f'apns_relay_token_removal_guard_tripped{{{POOL}}} 0x10',
                 f'apns_relay_channel_removal_guard_tripped{{{POOL}}} 0x10'],
        blip=[f'apns_relay_channel_removal_guard_tripped{{{POOL}}} 0 1 0x8'],
        quiet_at=["1m", "2m", "5m"]),
    # 1 possible duplicate a second for 40 minutes; healthy: none; blip: 100 at once (one lost connection).
    "APNsRelayPossibleDuplicatePushes": case(
        "APNsRelayPossibleDuplicatePushes",
        fire=[f'apns_relay_possible_duplicate_pushes_total{{{REPLICA}}} 0+60x40'],
        fire_at="30m",
        labels={**GROUP, "severity": "warning"},
        annotations={
            "summary": "apns-relay resends pushes APNs may already have delivered",
            "description": "1 resends a second after timeouts or lost connections over 10 minutes: each may have reached a "
                           "device twice."},
        healthy=[f'apns_relay_possible_duplicate_pushes_total{{{REPLICA}}} 0x40'],
        blip=[f'apns_relay_possible_duplicate_pushes_total{{{REPLICA}}} 0x5 100x35'],
        quiet_at=["10m", "20m", "30m"]),
    # 50 deliveries in a row without a connection, for 10 minutes; healthy: 0; blip: 2 minutes of it.
    "APNsRelayAPNsUnreachable": case(
        "APNsRelayAPNsUnreachable",
        fire=[f'apns_relay_apns_connect_failure_streak{{{REPLICA}}} 50x15'],
        fire_at="10m",
        labels={**GROUP, "instance": "10.0.0.7:9090"},
        annotations={
            "summary": "apns-relay 10.0.0.7:9090 cannot connect to APNs",
            "description": "50 deliveries in a row found no APNs connection (DNS, TCP, TLS or a proxy): nothing is being sent."},
        healthy=[f'apns_relay_apns_connect_failure_streak{{{REPLICA}}} 0x15'],
        blip=[f'apns_relay_apns_connect_failure_streak{{{REPLICA}}} 50x2 0x13'],
        quiet_at=["2m", "6m", "10m"]),
    # 600 of 6600 answers a minute are 503 (9.1 %); healthy: 1 %; blip: 3 minutes of 9 %.
    "APNsRelayAPNsErrors": case(
        "APNsRelayAPNsErrors",
        fire=[f'apns_client_responses_total{{{POOL},status="200",reason=""}} 0+6000x30',
              f'apns_client_responses_total{{{POOL},status="503",reason="ServiceUnavailable"}} 0+600x30'],
        fire_at="20m",
        labels={**GROUP, "credential": "acme", "environment": "production", "severity": "warning"},
        annotations={
            "summary": "APNs answers 429/5xx to 9.091% of the pushes of acme in production",
            "description": "APNs throttles or fails 9.091% of the requests (429 TooManyRequests, 500, 503) over 5 minutes; the "
                           "relay retries them with backoff, so results come late or fail."},
        healthy=[f'apns_client_responses_total{{{POOL},status="200",reason=""}} 0+6000x30',
                 f'apns_client_responses_total{{{POOL},status="503",reason="ServiceUnavailable"}} 0+60x30'],
        blip=[f'apns_client_responses_total{{{POOL},status="200",reason=""}} 0+6000x30',
              f'apns_client_responses_total{{{POOL},status="429",reason="TooManyRequests"}} 0x5 0+600x3 1800x22'],
        quiet_at=["8m", "15m", "25m"]),
    # 600 of 6000 events a minute dead-lettered (10 %); healthy: 0.1 %; blip: 3 minutes of it.
    "APNsRelayDeadLetters": case(
        "APNsRelayDeadLetters",
        fire=[f'apns_relay_events_consumed_total{{{REPLICA}}} 0+6000x30',
              f'apns_relay_dead_letters_total{{{REPLICA}}} 0+600x30'],
        fire_at="25m",
        labels={**GROUP, "severity": "warning"},
        annotations={
            "summary": "10% of the events are dead-lettered",
            "description": "10% of the events consumed over 5 minutes were invalid, too large or unroutable and went to the "
                           "dead-letter topic: a producer ships broken events."},
        healthy=[f'apns_relay_events_consumed_total{{{REPLICA}}} 0+6000x30',
                 f'apns_relay_dead_letters_total{{{REPLICA}}} 0+6x30'],
        blip=[f'apns_relay_events_consumed_total{{{REPLICA}}} 0+6000x30',
              f'apns_relay_dead_letters_total{{{REPLICA}}} 0x5 0+600x3 1800x22'],
        quiet_at=["8m", "15m", "25m"]),
    # A client certificate that expires 10 days after the test's epoch; healthy: 90 days (and the CA file's 5
    # years); blip: one scrape that read a wrong value.
    "APNsRelayCertificateExpiring": case(
        "APNsRelayCertificateExpiring",
        fire=[f'apns_client_certificate_expiry_timestamp_seconds{{{REPLICA},credential="beta"}} 864900x30'],
        fire_at="20m",
        labels={**GROUP, "credential": "beta", "severity": "warning"},
        annotations={
            "summary": "An APNs certificate of apns-relay expires in 9d 23h 55m 0s",
            "description": 'The client certificate of credential "beta" (or, without a credential label, a certificate of the CA '
                           "file apns.caFile) expires in 9d 23h 55m 0s: once it has, every push with it fails."},
        healthy=[f'apns_client_certificate_expiry_timestamp_seconds{{{REPLICA},credential="beta"}} 7776000x30',
                 f'apns_client_ca_certificate_expiry_timestamp_seconds{{{REPLICA}}} 157680000x30'],
        blip=[f'apns_client_certificate_expiry_timestamp_seconds{{{REPLICA},credential="beta"}} 7776000x5 100 7776000x24'],
        quiet_at=["5m", "10m", "20m"]),
    # Not ready for 10 minutes; healthy: ready; blip: 2 minutes of starting up.
    "APNsRelayNotReady": case(
        "APNsRelayNotReady",
        fire=[f'apns_relay_ready{{{REPLICA}}} 0x15'],
        fire_at="10m",
        labels={**GROUP, "instance": "10.0.0.7:9090", "severity": "warning"},
        annotations={
            "summary": "apns-relay 10.0.0.7:9090 is not ready",
            "description": '10.0.0.7:9090 has answered /readyz "not ready" for a while: it is not joined to its consumer group, '
                           "Kafka is unreachable, or its results do not reach Kafka."},
        healthy=[f'apns_relay_ready{{{REPLICA}}} 1x15'],
        blip=[f'apns_relay_ready{{{REPLICA}}} 0x2 1x13'],
        quiet_at=["2m", "6m", "10m"]),
    # The only replica's target down for 15 minutes; healthy: up and ready; blip: 2 minutes down (a restart).
    "APNsRelayFleetDown": case(
        "APNsRelayFleetDown",
        fire=[f'up{{{REPLICA}}} 0x15'],
        fire_at="10m",
        labels=GROUP,
        annotations=FLEET_DOWN,
        healthy=[f'up{{{REPLICA}}} 1x15', f'apns_relay_ready{{{REPLICA}}} 1x15'],
        blip=[f'up{{{REPLICA}}} 0x2 1x13', f'apns_relay_ready{{{REPLICA}}} _x2 1x13'],
        quiet_at=["2m", "6m", "10m"]),
    # Both replicas scraped, neither ready (every broker down); healthy: one of two ready; blip: 3 minutes of
    # neither (a rolling restart, a short Kafka outage).
    "APNsRelayFleetDown, none ready": case(
        "APNsRelayFleetDown",
        fire=[f'up{{{REPLICA}}} 1x15', f'up{{{OTHER_REPLICA}}} 1x15',
              f'apns_relay_ready{{{REPLICA}}} 0x15', f'apns_relay_ready{{{OTHER_REPLICA}}} 0x15'],
        fire_at="10m",
        labels=GROUP,
        annotations=FLEET_DOWN,
        healthy=[f'up{{{REPLICA}}} 1x15', f'up{{{OTHER_REPLICA}}} 0x15',
                 f'apns_relay_ready{{{REPLICA}}} 1x15', f'apns_relay_ready{{{OTHER_REPLICA}}} 0x15'],
        blip=[f'up{{{REPLICA}}} 1x15', f'apns_relay_ready{{{REPLICA}}} 0x3 1x12'],
        quiet_at=["3m", "6m", "10m"]),
    # No target of the release at all (scaled to zero, deleted, the ServiceMonitor selecting nothing): only
    # another job's; the alert's labels are the selector's. Blip: the first target appears after 3 minutes.
    "APNsRelayFleetDown, no target": case(
        "APNsRelayFleetDown",
        fire=['up{job="kube-state-metrics",namespace="monitoring",instance="10.0.9.1:8080"} 1x15'],
        fire_at="10m",
        labels={"job": "push-apns-relay"},
        annotations=FLEET_DOWN,
        healthy=[f'up{{{REPLICA}}} 1x15', f'apns_relay_ready{{{REPLICA}}} 1x15'],
        blip=[f'up{{{REPLICA}}} _x3 1x12', f'apns_relay_ready{{{REPLICA}}} _x3 1x12'],
        quiet_at=["2m", "6m", "10m"]),
    # A changed key refused at 10 minutes and never replaced; healthy: a key rotated; blip: refused, then fixed
    # 3 minutes later (the fix is a rotation).
    "APNsRelaySigningKeyRefused": case(
        "APNsRelaySigningKeyRefused",
        fire=[f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="refused"}} 0x10 1x30',
              f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="rotated"}} 0x40'],
        fire_at="20m",
        labels={**GROUP, "credential": "acme", "severity": "warning"},
        annotations=SIGNING_KEY_REFUSED,
        healthy=[f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="refused"}} 0x40',
                 f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="rotated"}} 0x10 1x30'],
        blip=[f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="refused"}} 0x10 1x30',
              f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="rotated"}} 0x13 1x27'],
        quiet_at=["5m", "15m", "35m"]),
    # Fixed by replacing the pods instead: the refusing replica is gone at 15 minutes, its successor loaded the
    # good key at start (nothing to rotate).
    "APNsRelaySigningKeyRefused, pods replaced": case(
        "APNsRelaySigningKeyRefused",
        fire=[f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="refused"}} 0x10 1x30',
              f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="rotated"}} 0x40'],
        fire_at="20m",
        labels={**GROUP, "credential": "acme", "severity": "warning"},
        annotations=SIGNING_KEY_REFUSED,
        healthy=[f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="refused"}} 0x40'],
        blip=[f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="refused"}} 0x10 1x5',
              f'apns_relay_signing_key_reloads_total{{{REPLICA},credential="acme",result="rotated"}} 0x15',
              f'apns_relay_signing_key_reloads_total{{{OTHER_REPLICA},credential="acme",result="refused"}} _x16 0x24',
              f'apns_relay_signing_key_reloads_total{{{OTHER_REPLICA},credential="acme",result="rotated"}} _x16 0x24'],
        quiet_at=["25m", "35m"]),
    # Fenced once at 10 minutes, then the restarted container's counter starts again at 0; healthy: commits only;
    # blip: a restart without a fence (the counters reset, nothing counted).
    "APNsRelayProducerFenced": case(
        "APNsRelayProducerFenced",
        fire=[f'apns_relay_transactions_total{{{REPLICA},outcome="fenced"}} 0x10 1 0x30',
              f'apns_relay_transactions_total{{{REPLICA},outcome="committed"}} 0+600x10 0+600x30'],
        fire_at="15m",
        labels={**GROUP, "instance": "10.0.0.7:9090", "severity": "warning"},
        annotations=PRODUCER_FENCED,
        healthy=[f'apns_relay_transactions_total{{{REPLICA},outcome="fenced"}} 0x40',
                 f'apns_relay_transactions_total{{{REPLICA},outcome="committed"}} 0+600x40'],
        blip=[f'apns_relay_transactions_total{{{REPLICA},outcome="fenced"}} 0x10 _x2 0x28',
              f'apns_relay_transactions_total{{{REPLICA},outcome="committed"}} 0+600x10 _x2 0+600x28'],
        quiet_at=["5m", "15m", "35m"]),
    # The fence of 10 minutes has left the 30-minute window by 41 minutes.
    "APNsRelayProducerFenced, window passed": case(
        "APNsRelayProducerFenced",
        fire=[f'apns_relay_transactions_total{{{REPLICA},outcome="fenced"}} 0x10 1 0x30'],
        fire_at="15m",
        labels={**GROUP, "instance": "10.0.0.7:9090", "severity": "warning"},
        annotations=PRODUCER_FENCED,
        healthy=[f'apns_relay_transactions_total{{{REPLICA},outcome="fenced"}} 0x10 1 0x40'],
        blip=[f'apns_relay_transactions_total{{{REPLICA},outcome="fenced"}} 0x10 1x40'],
        quiet_at=["42m", "50m"]),
    # Partition 0 grows by 1000 events a minute from 20000 (its previous owner still shows a stale 15000),
    # partition 1 holds at 5000: 50000 at 25 minutes. Healthy: a high lag that goes up and down every minute,
    # and one that grows but stays under minLag; blip: 8 minutes of growth, then worked off.
    "APNsRelayConsumerLagGrowing": case(
        "APNsRelayConsumerLagGrowing",
        fire=[f'apns_relay_consumer_lag{{{REPLICA},topic="apns-notifications",partition="0"}} 20000+1000x40',
              f'apns_relay_consumer_lag{{{OTHER_REPLICA},topic="apns-notifications",partition="0"}} 15000x40',
              f'apns_relay_consumer_lag{{{OTHER_REPLICA},topic="apns-notifications",partition="1"}} 5000x40'],
        fire_at="25m",
        labels={**GROUP, "severity": "warning"},
        annotations={
            "summary": "apns-relay's consumer lag keeps growing (50k events)",
            "description": "The consumer group of push-apns-relay has 50k events of lag, and it has grown throughout the "
                           "last 15m: events arrive faster than the group finishes them."},
        healthy=[f'apns_relay_consumer_lag{{{REPLICA},topic="apns-notifications",partition="0"}} '
                 + " ".join(["30000", "32000"] * 20 + ["30000"]),
                 f'apns_relay_consumer_lag{{{REPLICA},topic="apns-notifications",partition="1"}} 0+100x40'],
        blip=[f'apns_relay_consumer_lag{{{REPLICA},topic="apns-notifications",partition="0"}} 20000+1000x8 27000-1000x7 20000x24'],
        quiet_at=["5m", "10m", "20m", "30m"]),
}


# --- tests ---------------------------------------------------------------------------------------------------

def promtool(*arguments: str) -> str:
    assert PROMTOOL, "promtool is not installed (Debian: apt-get install prometheus; make test installs it)"
    done = subprocess.run([PROMTOOL, *arguments], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"promtool {' '.join(arguments)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_rules_are_valid():
    with tempfile.TemporaryDirectory() as directory:
        rules = pathlib.Path(directory) / "rules.yaml"
        write_rules(rules)
        out = promtool("check", "rules", str(rules))
        assert f"SUCCESS: {len({name.split(',')[0] for name in CASES})} rules found" in out, out


def test_every_alert_has_a_case_and_a_runbook_section():
    names = [rule["alert"] for rule in rule_groups()[0]["rules"]]
    assert sorted(names) == sorted({name.split(",")[0] for name in CASES}), f"alerts {names} vs cases {sorted(CASES)}"
    readme = (ROOT / "README.md").read_text()
    for name in names:
        assert f"\n#### {name}\n" in readme, f"README has no '#### {name}' section (the runbook_url's anchor)"


def test_each_alert_fires_on_its_series_and_stays_silent_on_healthy_ones_and_blips():
    with tempfile.TemporaryDirectory() as directory:
        write_rules(pathlib.Path(directory) / "rules.yaml")
        tests = pathlib.Path(directory) / "tests.yaml"
        tests.write_text(yaml.safe_dump({
            "rule_files": ["rules.yaml"], "evaluation_interval": "1m",
            "tests": [group for groups in CASES.values() for group in groups],
        }, sort_keys=False, allow_unicode=True))
        promtool("test", "rules", str(tests))


def test_thresholds_and_for_come_from_values():
    groups = rule_groups({"metrics": {"prometheusRule": {
        "selector": 'namespace="push",app="relay"',
        "alerts": {"credentialRefused": {"for": "1s", "perSecond": 0.5}, "notReady": {"enabled": False}}}}})
    rules = {rule["alert"]: rule for rule in groups[0]["rules"]}
    assert "APNsRelayNotReady" not in rules
    refused = rules["APNsRelayCredentialRefused"]
    assert refused["for"] == "1s" and ") > 0.5\n" in refused["expr"], refused
    assert all('{namespace="push",app="relay"' in rule["expr"] for rule in rules.values()), rules


def test_fleet_down_counts_no_target_as_down_unless_keda_may_scale_to_zero():
    def fleet_down(values: dict | None = None) -> str:
        [rule] = [r for r in rule_groups(values)[0]["rules"] if r["alert"] == "APNsRelayFleetDown"]
        return rule["expr"]
    assert 'absent(up{job="push-apns-relay"})' in fleet_down()
    assert "absent(" in fleet_down({"keda": {"enabled": True, "minReplicaCount": 1}})
    # An idle release that KEDA scaled to zero has no target, and nothing is wrong.
    scaled_to_zero = fleet_down({"keda": {"enabled": True, "minReplicaCount": 0}})
    assert "absent(" not in scaled_to_zero and 'max by (namespace, job) (up{job="push-apns-relay"}) == 0' in scaled_to_zero


def test_off_by_default():
    assert not render(REQUIRED).get("apns-relay/templates/prometheusrule.yaml", "").strip()


TESTS = [value for name, value in sorted(globals().items()) if name.startswith("test_") and callable(value)]

if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--render":
        write_rules(pathlib.Path(sys.argv[2]), json.loads(sys.argv[3]) if len(sys.argv) > 3 else None)
        sys.exit(0)
    passed = failed = 0
    for test in TESTS:
        try:
            test()
            passed += 1
            print(f"ok   {test.__name__}")
        except Exception:  # noqa: BLE001 - report every failure, then the count
            failed += 1
            print(f"FAIL {test.__name__}: {traceback.format_exc(limit=3).strip().splitlines()[-1]}")
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
