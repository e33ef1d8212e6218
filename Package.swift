// swift-tools-version:6.2
//
// apns-relay: Kafka → JSON Schema validation → APNs (HTTP/2) → results, at least once.
// Targets and their single jobs are described in README.md ("Code map").
import PackageDescription

let package = Package(
    name: "apns-relay",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "apns-relay", targets: ["apns-relay"]),
        .executable(name: "apns-mock", targets: ["apns-mock"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Deque (already resolved through swift-nio) for the FIFO queues.
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: [.defaults, "YAML"]),
        // swift-configuration's YAML parser; the relay lists a file's keys with it to refuse unknown ones.
        .package(url: "https://github.com/jpsim/Yams", "5.4.0"..<"7.0.0"),
        // Trace context (issue #25): the tracing API the relay's spans use, W3C header parsing, and
        // swift-otel's tracer with its OTLP/HTTP exporter (not gRPC: the relay needs one transport).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // MARK: System libraries (Debian -dev packages; see Makefile `deps`)
        .systemLibrary(
            name: "CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"])]
        ),
        .systemLibrary(
            name: "CNGHTTP2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),
        // glibc's <malloc.h>, for the heap gauges (mallinfo2).
        .systemLibrary(name: "CMalloc"),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // C++ (simdjson fast path + valijson reference) behind a C API.
        .target(
            name: "CEventJSON",
            cxxSettings: [.unsafeFlags(["-std=c++17"])],
            linkerSettings: [.linkedLibrary("simdjson"), .linkedLibrary("stdc++"), .linkedLibrary("m")]
        ),

        // MARK: Libraries
        // Small pieces every other target uses (one deadline-wait primitive, a reused-buffer pool, …).
        .target(name: "ServiceSupport", dependencies: [.product(name: "DequeModule", package: "swift-collections")]),
        .target(
            name: "Kafka",
            dependencies: [
                "CRdKafka", "ServiceSupport",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // librdkafka's mock cluster with fault injection, for the sandbox (demo, mock-kafka), tests and benchmarks;
        // never linked into the production binary.
        .target(
            name: "KafkaMock",
            dependencies: ["CRdKafka", "Kafka", .product(name: "Logging", package: "swift-log")]
        ),
        .target(name: "APNsCore"),
        // A block pool for each nghttp2 session (its `nghttp2_mem`): a request's frames and streams without malloc.
        .target(name: "CNGHTTP2Memory"),
        .target(
            name: "APNsClient",
            dependencies: [
                "APNsCore", "CNGHTTP2", "CNGHTTP2Memory", "COpenSSL", "ServiceSupport",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "APNsMock",
            dependencies: [
                "APNsCore", "ServiceSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The relay's public output contract: the records it publishes (result, removed token, removed channel,
        // dead letter and its headers) and their JSON encoders, beside `Schemas/`. Values only, no I/O: the
        // pipeline, `apns-relay replay` and the tests share it.
        .target(name: "RelayContract", dependencies: ["APNsCore"]),
        // The pipeline: consume → triage → deliver → publish → store offsets. Knows APNs only through
        // `NotificationSender`, Kafka through the Kafka target.
        .target(
            name: "Relay",
            dependencies: [
                "Kafka", "APNsCore", "CEventJSON", "RelayContract", "ServiceSupport",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
            ]
        ),
        // The application: configuration (file, environment, flags), credentials, the Kafka and APNs clients
        // and the ordered service list that `run`, `demo` and the tests start.
        .target(
            name: "RelayApp",
            dependencies: [
                "Relay", "RelayContract", "Kafka", "APNsCore", "APNsClient", "ServiceSupport", "CMalloc",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ]
        ),

        // In-process mock Kafka + mock APNs + throw-away key: for the demo, end-to-end tests and benchmarks.
        .target(
            name: "RelaySandbox",
            dependencies: [
                "Relay", "RelayApp", "Kafka", "KafkaMock", "APNsMock", "APNsClient", "APNsCore", "ServiceSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Executables
        .executableTarget(
            name: "apns-relay",
            dependencies: [
                "Relay", "RelayApp", "RelayContract", "Kafka", "ServiceSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The tools that run mocks (demo, mock-kafka), out of the production binary.
        .executableTarget(
            name: "apns-relay-sandbox",
            dependencies: [
                "Relay", "RelayApp", "Kafka", "KafkaMock", "APNsCore", "APNsMock", "RelaySandbox", "ServiceSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "apns-mock",
            dependencies: [
                "APNsMock", "ServiceSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Benchmarks (release builds; Benchmarks/*.sh run them beside a floor measured in the same run)
        .executableTarget(
            name: "KafkaConsumeBenchmark",
            dependencies: [
                "Kafka", "ServiceSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/KafkaConsume"
        ),

        .executableTarget(name: "DecodeBenchmark", dependencies: ["Relay", "CEventJSON"], path: "Benchmarks/Decode"),
        // Mock Kafka + mock APNs here, `apns-relay run` as a child process; floors (h2load, kcat, openssl) in the same run.
        .executableTarget(
            name: "EndToEndBenchmark",
            dependencies: [
                "Relay", "RelayApp", "RelayContract", "RelaySandbox", "APNsClient", "APNsMock", "Kafka", "ServiceSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/EndToEnd"
        ),
        // The mock APNs benchmark's floor: NIOHTTP2Handler on the mock's stack, answering 200 and checking nothing.
        .executableTarget(
            name: "nio-h2-floor",
            dependencies: [
                "APNsMock",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Benchmarks/NIOHTTP2Floor"
        ),
        .executableTarget(
            name: "apns-client-tool",
            dependencies: ["APNsClient", "APNsCore", "ServiceSupport", .product(name: "Logging", package: "swift-log")],
            path: "Benchmarks/APNsClient",
            exclude: ["README.md"]
        ),

        // MARK: Fuzzing (Fuzz/README.md, `make fuzz`)
        // Each fuzz target's one entry, shared by the libFuzzer drivers (Fuzz/Drivers, built outside SwiftPM with
        // sanitizers) and the corpus replay in `make test`: the C++ one for CEventJSON's C API, and the Swift ones.
        .target(
            name: "CEventJSONFuzz",
            dependencies: ["CEventJSON"],
            path: "Fuzz/EventJSON",
            cxxSettings: [.unsafeFlags(["-std=c++17"])]
        ),
        .target(
            name: "FuzzTargets",
            dependencies: ["CEventJSONFuzz", "Relay", "RelayApp", "APNsClient", "APNsCore"],
            path: "Fuzz/Targets"
        ),

        // MARK: Tests
        // What the test targets share: the mock APNs fixture, waiting with deadlines, processes, ports.
        .target(
            name: "TestSupport",
            dependencies: [
                "APNsMock", "APNsCore", "KafkaMock", "ServiceSupport", "ReaddirGuard",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/TestSupport"
        ),
        // Pads every readdir entry of the test process (a Foundation over-read; see its source).
        .target(name: "ReaddirGuard", path: "Tests/ReaddirGuard", linkerSettings: [.linkedLibrary("dl")]),
        .testTarget(name: "ServiceSupportTests", dependencies: ["ServiceSupport"]),
        .testTarget(name: "FuzzCorpusTests", dependencies: ["FuzzTargets"]),
        .testTarget(name: "KafkaTests", dependencies: ["Kafka", "KafkaMock", "ServiceSupport", "TestSupport", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "APNsCoreTests", dependencies: ["APNsCore", "TestSupport"]),
        .testTarget(name: "APNsClientTests", dependencies: ["APNsClient", "CNGHTTP2Memory", "APNsMock", "KafkaMock", "ServiceSupport", "TestSupport"]),
        .testTarget(
            name: "APNsMockTests",
            dependencies: [
                "APNsMock", "APNsCore", "ServiceSupport", "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "RelayTests", dependencies: ["Relay", "RelayApp", "RelayContract", "APNsMock", "APNsClient", "Kafka", "KafkaMock", "RelaySandbox", "ServiceSupport", "TestSupport", "ReaddirGuard", .product(name: "Yams", package: "Yams"),
            .product(name: "Crypto", package: "swift-crypto"), .product(name: "X509", package: "swift-certificates")]),
    ]
)
