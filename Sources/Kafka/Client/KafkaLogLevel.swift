import Logging

/// librdkafka logs with syslog levels (0 emergency … 7 debug).
enum KafkaLogLevel {
    static func loggerLevel(syslogLevel: Int32) -> Logger.Level {
        switch syslogLevel {
        case ...2: return .critical  // emergency, alert, critical
        case 3: return .error
        case 4: return .warning
        case 5: return .notice
        case 6: return .info
        default: return .debug
        }
    }
}
