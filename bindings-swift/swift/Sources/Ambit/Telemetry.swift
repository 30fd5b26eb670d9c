// Telemetry: the core's spans (`invoke_agent` > `turn` > `chat {model}` + `execute_tool {name}`, with the
// OpenTelemetry GenAI conventions' attributes) exported over OTLP/HTTP to a collector. Off by default.
//
//     try Telemetry.enable(endpoint: "http://localhost:4318", headers: ["x-api-key": "..."])
//     let result = try await agent.run("Weather in Paris?")
//     try Telemetry.flush()      // before exit: send what is pending
//     try Telemetry.disable()    // off again (enable turns it back on)

import Foundation

/// OTLP export of the core's spans, process-wide (the same switch as Python's `ambit.telemetry` and
/// Node's `telemetry`).
public enum Telemetry {
    /// Turns export on. `endpoint`: the collector's base URL (`/v1/traces` is added) or the traces URL;
    /// `recordContent`: message contents on the spans too (after the credential redactor: a value
    /// appears as `[credential:alias]`); `serviceName`: the resource's `service.name`. A bad endpoint
    /// throws `AmbitError.config` naming it.
    public static func enable(
        endpoint: String, headers: [String: String] = [:], recordContent: Bool = false,
        serviceName: String = "ambit"
    ) throws {
        do {
            try telemetryEnable(
                endpoint: endpoint, headers: headers, recordContent: recordContent, serviceName: serviceName)
        } catch {
            throw AmbitError(error)
        }
    }

    /// Exports every finished span not yet sent.
    public static func flush() throws {
        do { try telemetryFlush() } catch { throw AmbitError(error) }
    }

    /// Exports what is pending and turns export off.
    public static func disable() throws {
        do { try telemetryDisable() } catch { throw AmbitError(error) }
    }
}
