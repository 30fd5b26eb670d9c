//! The test models read their replies back through each wire's real decoder: what comes out is what a
//! hosted model's answer of the same content decodes to.

use serde_json::json;

use super::*;
use crate::model::StopReason;

fn request() -> ModelRequest {
    ModelRequest {
        instructions: Some("Be brief.".into()),
        messages: vec![Message::user("Weather in Paris?")],
        tools: vec![ToolSpec::new("get_weather", "Weather.", json!({"type": "object", "properties": {}}))],
        output: None,
    }
}

const WIRES: [Wire; 3] = [Wire::OpenaiChat, Wire::Anthropic, Wire::OpenaiResponses];

#[tokio::test]
async fn a_reply_decodes_the_same_on_every_wire_whole_and_streamed() {
    for wire in WIRES {
        for stream in [false, true] {
            let model = TestModel::new([
                Reply::text("Let me look.").with_tool_call("get_weather", json!({"city": "Paris"})).with_usage(7, 3),
                Reply::text("Sunny in Paris."),
            ])
            .wire(wire)
            .stream(stream);
            let pieces = Mutex::new(Vec::<String>::new());
            let sink = |t: &str| pieces.lock().unwrap_or_else(|p| p.into_inner()).push(t.to_string());
            let first = model.respond_with_items(&request(), Some(&sink)).await.expect("first reply");
            let r = &first.response;
            assert_eq!(r.text.as_deref(), Some("Let me look."), "{wire:?} stream={stream}");
            assert_eq!(r.tool_calls.len(), 1);
            assert_eq!(r.tool_calls[0].name, "get_weather");
            assert_eq!(serde_json::from_str::<Value>(&r.tool_calls[0].arguments).ok(), Some(json!({"city": "Paris"})));
            assert_eq!(r.tool_calls[0].id, "call_1_0");
            assert_eq!(r.stop, StopReason::ToolCalls);
            assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (7, 3));
            assert_eq!(pieces.lock().unwrap_or_else(|p| p.into_inner()).concat(), "Let me look.");
            if stream {
                // A streamed answer reaches the sink in pieces, as deltas do.
                assert!(pieces.lock().unwrap_or_else(|p| p.into_inner()).len() > 1, "{wire:?}");
            }
            let second = model.respond(&request()).await.expect("second reply");
            assert_eq!(second.text.as_deref(), Some("Sunny in Paris."));
            assert_eq!(second.stop, StopReason::End);
            // The script is spent: the next request fails, naming it.
            let err = model.respond(&request()).await.expect_err("no reply left");
            assert_eq!(err.code(), "model_response");
            assert!(err.to_string().contains("no reply left for request 3: it was scripted with 2"), "{err}");
            // The requests were written as the wire writes them.
            let seen = model.requests();
            assert_eq!(seen.len(), 3);
            let body = seen[0].body.to_string();
            assert!(body.contains("Weather in Paris?") && body.contains("get_weather"), "{body}");
            assert_eq!(seen[0].body.get("stream").and_then(Value::as_bool).unwrap_or(false), stream, "{body}");
        }
    }
}

#[tokio::test]
async fn a_function_model_sees_the_request_and_its_wire_body() {
    let model = FunctionModel::new(|r: &TestRequest| {
        let last = match r.messages.last() {
            Some(Message::User { content, .. }) => content.clone(),
            other => return Err(format!("unexpected last message {other:?}")),
        };
        Ok(Reply::text(format!("{} request(s); you said {last}; body model {}", r.index, r.body["model"])))
    })
    .wire(Wire::Anthropic)
    .name("claude-test");
    let r = model.respond(&request()).await.expect("reply");
    assert_eq!(r.text.as_deref(), Some("1 request(s); you said Weather in Paris?; body model \"claude-test\""));
    let failing = FunctionModel::new(|_: &TestRequest| Err("boom".to_string()));
    let err = failing.respond(&request()).await.expect_err("the function failed");
    assert_eq!(err.code(), "model_response");
    assert!(err.to_string().contains("the test model's function failed: boom"), "{err}");
}

#[test]
fn the_plain_data_form_refuses_what_it_cannot_carry_by_name() {
    let err = |text: &str| build_model(text, None).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err(r#"{"test_model": {"replies": [{"contnt": "x"}]}}"#).contains("replies[0]"));
    assert!(err(r#"{"test_model": {"replies": [{"content": "x"}]}, "x": 1}"#).contains("unknown field `x`"));
    assert!(err(r#"{"test_model": {"replies": [{"tool_calls": [{"name": ""}]}]}}"#).contains("empty name"));
    assert!(
        err(r#"{"test_model": {"replies": [{"tool_calls": [{"name": "a", "arguments": [1]}]}]}}"#)
            .contains("not a JSON object")
    );
    assert!(err(r#"{"test_model": {}}"#).contains("give replies"));
    assert!(err(r#"{"test_model": {"wire": "grpc", "replies": []}}"#).contains("grpc"));
    assert!(err(r#"{"test_model": {"model": " ", "replies": []}}"#).contains("model name is empty"));
    assert!(build_model(r#"{"test_model": {"wire": "anthropic", "replies": []}}"#, None).is_ok());
}
