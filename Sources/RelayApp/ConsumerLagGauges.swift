import CoreMetrics
import Foundation
import Relay

/// Turns librdkafka's statistics JSON into `apns_relay_consumer_lag{topic,partition}` gauges.
enum ConsumerLagGauges {
    static func handler() -> @Sendable (String) -> Void {
        { json in
            guard let data = json.data(using: .utf8),
                let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let topics = root["topics"] as? [String: Any]
            else { return }
            for (topic, value) in topics {
                guard let partitions = (value as? [String: Any])?["partitions"] as? [String: Any] else { continue }
                for (partition, stats) in partitions where partition != "-1" {
                    guard let stats = stats as? [String: Any], let lag = stats["consumer_lag"] as? Int, lag >= 0 else { continue }
                    Gauge(label: "apns_relay_consumer_lag", dimensions: [("topic", topic), ("partition", partition)]).record(lag)
                }
            }
        }
    }
}
