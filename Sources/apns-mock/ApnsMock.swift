import APNsMock
@main struct Main { static func main() { print("apns-mock") } }
