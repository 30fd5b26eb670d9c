//! The typed events of a run, and the stream that carries them ([`Agent::stream`](super::Agent::stream)).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use super::RunResult;
use crate::error::Error;
use crate::model::{StopReason, Usage};

/// One thing that happened during a run, in the order it happened. Serialized with a `type` tag
/// (`run_started`, `model_request`, …), the form every binding hands to its language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The run began with this user message.
    RunStarted {
        /// The user message.
        input: String,
    },
    /// A model request is about to be sent (`turn` counts from 1).
    ModelRequest {
        /// The turn, from 1.
        turn: u32,
    },
    /// A piece of the model's text, as it streams (the whole text at once on an unstreamed wire).
    TextDelta {
        /// The piece of text.
        text: String,
    },
    /// The model answered; `usage` is this request's, `cost` its cost when the price table has the model,
    /// `stop_reason` why the model stopped (`length`: cut by the output token limit).
    ModelResponse {
        /// The turn, from 1.
        turn: u32,
        /// This request's token counts.
        usage: Usage,
        /// This request's cost, when the price table has the model.
        cost: Option<f64>,
        /// Why the model stopped.
        #[serde(default)]
        stop_reason: StopReason,
    },
    /// The model asked for a tool call. `from_text`: the call was read from the answer's text (the
    /// `text_tool_calls` setting), not sent as a call by the server.
    ToolCallRequested {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments the model sent.
        arguments: Value,
        /// Whether the call was read from the answer's text.
        #[serde(default)]
        from_text: bool,
    },
    /// The tool call is about to run.
    ToolStarted {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// The tool call ended; `result` is what the model sees.
    ToolFinished {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
        /// What the model sees.
        result: String,
        /// Whether the call failed.
        is_error: bool,
    },
    /// The call was refused before the tool ran; `reason` is what the model sees.
    ToolRefused {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
        /// Why, as the model sees it.
        reason: String,
    },
    /// A call was put to the approval handler.
    ApprovalRequested {
        /// What the handler was asked.
        request: crate::permission::ApprovalRequest,
    },
    /// A call went to the background as task `task_id`.
    BackgroundTaskStarted {
        /// The task's id.
        task_id: String,
        /// The id of the call that started it.
        call_id: String,
        /// The tool's name.
        name: String,
    },
    /// A background task reported progress.
    BackgroundTaskProgress {
        /// The task's id.
        task_id: String,
        /// What the task said.
        note: String,
    },
    /// A background task's result reached the model as its own turn (finished, failed, cancelled, or
    /// failed as dead).
    BackgroundTaskReported {
        /// The task's id.
        task_id: String,
        /// The tool's name.
        name: String,
        /// What the model sees.
        result: String,
        /// Whether the task failed.
        is_error: bool,
    },
    /// The loop told the model its checklist still has open items (`nudge` counts from 1).
    ChecklistNudge {
        /// The nudge, from 1.
        nudge: u32,
        /// The open items' texts.
        open_items: Vec<String>,
    },
    /// A guardrail gave its verdict (`kind`: `input` or `output`); a tripped one ends the run with
    /// `guardrail_tripped`.
    GuardrailChecked {
        /// The guardrail's name.
        guardrail: String,
        /// `input` or `output`.
        kind: String,
        /// Whether it tripped.
        tripped: bool,
        /// What the guardrail said with its verdict.
        info: Value,
    },
    /// The run ended with this result.
    RunFinished {
        /// The run's token counts.
        usage: Usage,
        /// The run's result.
        result: RunResult,
    },
}

/// Where the loop sends events; a run without a listener sends nowhere.
#[derive(Debug, Clone, Default)]
pub(crate) struct Emitter {
    tx: Option<mpsc::UnboundedSender<Event>>,
}

impl Emitter {
    pub fn new(tx: mpsc::UnboundedSender<Event>) -> Self {
        Emitter { tx: Some(tx) }
    }

    pub fn emit(&self, event: Event) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(event);
        }
    }

    pub fn is_on(&self) -> bool {
        self.tx.is_some()
    }
}

type RunFuture = Pin<Box<dyn Future<Output = Result<RunResult, Error>> + Send>>;

/// The events of one run, ending with [`Event::RunFinished`], or with the run's error as the last item.
/// The run is driven by polling the stream; dropping the stream cancels the run, its HTTP request and
/// its tools.
pub struct RunStream {
    run: Option<RunFuture>,
    rx: mpsc::UnboundedReceiver<Event>,
    end: Option<Result<RunResult, Error>>,
    done: bool,
}

impl std::fmt::Debug for RunStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStream").field("done", &self.done).finish()
    }
}

impl RunStream {
    pub(crate) fn new(run: RunFuture, rx: mpsc::UnboundedReceiver<Event>) -> Self {
        RunStream { run: Some(run), rx, end: None, done: false }
    }

    /// A stream whose run failed before it started (a binding's input the core refused): its only item
    /// is `error`.
    pub fn failed(error: Error) -> Self {
        let (_tx, rx) = mpsc::unbounded_channel();
        RunStream::new(Box::pin(async move { Err(error) }), rx)
    }
}

impl Stream for RunStream {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(run) = this.run.as_mut()
            && let Poll::Ready(outcome) = run.as_mut().poll(cx)
        {
            this.run = None;
            this.end = Some(outcome);
        }
        match this.rx.poll_recv(cx) {
            Poll::Ready(Some(e)) => return Poll::Ready(Some(Ok(e))),
            Poll::Ready(None) | Poll::Pending if this.run.is_none() => {}
            _ => return Poll::Pending,
        }
        // The run is over and every event it sent has been handed out.
        if let Ok(e) = this.rx.try_recv() {
            return Poll::Ready(Some(Ok(e)));
        }
        this.done = true;
        match this.end.take() {
            Some(Ok(result)) => Poll::Ready(Some(Ok(Event::RunFinished { usage: result.usage, result }))),
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
            None => Poll::Ready(None),
        }
    }
}

type Spawned = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A run's stream driven by a task of its own, for the bindings: each language awaits [`EventFeed::next`]
/// from its own event loop, and [`EventFeed::cancel`] stops the run, its HTTP request and its tools.
pub struct EventFeed {
    rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Result<Event, Error>>>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for EventFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFeed").finish_non_exhaustive()
    }
}

impl EventFeed {
    /// Starts driving `stream` with `spawn` (which puts the future on a runtime, wrapped as the binding
    /// needs, e.g. with its language's task locals).
    pub fn start(mut stream: RunStream, spawn: impl FnOnce(Spawned) -> tokio::task::JoinHandle<()>) -> Self {
        use futures::StreamExt;
        let (tx, rx) = mpsc::unbounded_channel();
        let task = spawn(Box::pin(async move {
            while let Some(item) = stream.next().await {
                if tx.send(item).is_err() {
                    break;
                }
            }
        }));
        EventFeed { rx: tokio::sync::Mutex::new(rx), task: std::sync::Mutex::new(Some(task)) }
    }

    /// The next event; the run's error as the last item when it fails; `None` once the run is over
    /// (or cancelled).
    pub async fn next(&self) -> Option<Result<Event, Error>> {
        self.rx.lock().await.recv().await
    }

    /// The next item as [`EventFeed::next`] waits for it, with the items already waiting behind it (at
    /// most `max` in all), in order: a binding hands them over in one crossing instead of one each.
    /// Empty once the run is over (or cancelled).
    pub async fn next_batch(&self, max: usize) -> Vec<Result<Event, Error>> {
        let mut rx = self.rx.lock().await;
        let mut out = Vec::new();
        if let Some(first) = rx.recv().await {
            out.push(first);
            while out.len() < max {
                match rx.try_recv() {
                    Ok(item) => out.push(item),
                    Err(_) => break,
                }
            }
        }
        out
    }

    /// Stops the run: its task is aborted, which drops its HTTP request and its tool calls.
    pub fn cancel(&self) {
        if let Some(t) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            t.abort();
        }
    }
}

impl Drop for EventFeed {
    fn drop(&mut self) {
        self.cancel();
    }
}

#[cfg(test)]
mod feed_tests {
    use super::*;

    /// `next_batch` hands over what is waiting in order, at most `max` at a time, without losing an item
    /// at a batch's edge, then waits for the next; once the run is over, empty. (The Node binding's
    /// stream crosses to JS one batch at a time.)
    #[tokio::test]
    async fn batches_keep_every_event_in_order_across_their_edges() {
        let (tx, rx) = mpsc::unbounded_channel();
        let feed = EventFeed { rx: tokio::sync::Mutex::new(rx), task: std::sync::Mutex::new(None) };
        for turn in 0..150u32 {
            tx.send(Ok(Event::ModelRequest { turn })).unwrap();
        }
        let mut seen = Vec::new();
        for want in [64, 64, 22] {
            let batch = feed.next_batch(64).await;
            assert_eq!(batch.len(), want);
            seen.extend(batch.into_iter().map(|e| match e {
                Ok(Event::ModelRequest { turn }) => turn,
                other => panic!("{other:?}"),
            }));
        }
        assert_eq!(seen, (0..150).collect::<Vec<_>>());
        // A batch waits for the next item rather than answering empty while the run goes on.
        let waiting = tokio::spawn(async move {
            let batch = feed.next_batch(64).await;
            (batch.len(), feed.next_batch(64).await.len())
        });
        tx.send(Ok(Event::ModelRequest { turn: 150 })).unwrap();
        drop(tx);
        assert_eq!(waiting.await.unwrap(), (1, 0));
    }
}
