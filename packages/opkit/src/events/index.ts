/**
 * events — the Event recorder: `events.k8s.io/v1` Events with client-go's manners (a repeat becomes a
 * series count on the first Event, a per-object token bucket drops bursts, failures go to a callback).
 *
 * It uses the client and the clock. It knows nothing about controllers or reconciles: the controller
 * hands each reconcile a recorder, and helpers take one as an argument.
 */

export {
  EventRecorder,
  EventsV1,
  clientEventSink,
  type EventInput,
  type EventRecorderOptions,
  type EventRecorderStats,
  type EventSeries,
  type EventSink,
  type EventType,
  type EventV1,
  type ObjectReference,
} from "./recorder.ts";
