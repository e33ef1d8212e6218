import Kafka
@main struct Main { static func main() { print("apns-relay") } }
