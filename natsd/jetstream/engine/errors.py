"""The JetStream API error catalogue: nats-server's errors.json as data, `ApiError`, replies.

Owns: every API error's HTTP-like `code`, `err_code` and `description` (same constants as
nats-server's errors.json, e.g. `JSStreamNotFoundErr`), the `ApiError` exception, one named
constructor per constant (`errors.error("JSStreamNotFoundErr")`, `errors.error("JSStreamStoreFailedF", err=...)`
substitutes `{err}` in the description) and `api_response()`, the JSON encoder of API replies
(Go's encoding: compact, `<`/`>`/`&` escaped as \\u003c/\\u003e/\\u0026).
"""
import json
import re

__all__ = ["ApiError", "api_response", "dumps", "CATALOG", "error"]


class ApiError(Exception):
    """An API error reply: {"code": code, "err_code": err_code, "description": description}."""

    def __init__(self, code, err_code, description):
        super().__init__(description)
        self.code = code
        self.err_code = err_code
        self.description = description

    def to_dict(self):
        return {"code": self.code, "err_code": self.err_code, "description": self.description}

    def __repr__(self):
        return "ApiError(%d, %d, %r)" % (self.code, self.err_code, self.description)


_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj):
    """JSON like Go's encoding/json: compact, HTML characters escaped; a string holding bytes
    that are not UTF-8 (surrogate escapes, e.g. a stored subject) is written as Go writes
    invalid UTF-8: one U+FFFD per bad byte."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    if "<" in s or ">" in s or "&" in s:
        s = s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    if "\u2028" in s or "\u2029" in s:
        s = s.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    try:
        return s.encode()
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", s).encode()


_PREFIX = "io.nats.jetstream.api.v1."
_PAGED = {"total": 0, "offset": 0, "limit": 0}

# Zero-valued fields nats-server's response structs still carry next to an error (fields
# without omitempty), by response type.
ERROR_EXTRAS = {
    "stream_info_response": _PAGED,
    "stream_purge_response": {"purged": 0},
    "stream_names_response": dict(_PAGED, streams=None),
    "stream_list_response": dict(_PAGED, streams=[]),
    "stream_restore_response": {"deliver_subject": ""},
    "consumer_names_response": dict(_PAGED, consumers=[]),
    "consumer_list_response": dict(_PAGED, consumers=[]),
    "consumer_pause_response": {"paused": False, "pause_until": "0001-01-01T00:00:00Z"},
    "consumer_reset_response": {"reset_seq": 0},
}


def api_response(type_name, payload):
    """Encode an API reply. `type_name` is e.g. "stream_info_response" (prefix added) or a full
    io.nats... name; `payload` is a dict of fields or an ApiError."""
    if not type_name.startswith("io.nats."):
        type_name = "io.nats.jetstream.api.v1." + type_name
    out = {"type": type_name}
    if isinstance(payload, ApiError):
        out["error"] = payload.to_dict()
        extra = ERROR_EXTRAS.get(type_name[25:] if type_name.startswith(_PREFIX) else type_name)
        if extra:
            out.update(extra)
    elif payload:
        out.update(payload)
    return dumps(out)


def error(constant, **kw):
    """Build the ApiError for a catalogue constant, substituting {placeholders} from kw."""
    code, err_code, desc = CATALOG[constant]
    for k, v in kw.items():
        desc = desc.replace("{" + k + "}", str(v))
    return ApiError(code, err_code, desc)


# The error nats-server's handler for each API op answers when its work fails for a reason
# that is not a request error (a store or internal failure): constant, description.
# Internal failures never put Python exception texts or store paths in a reply.
_INTERNAL = {
    "STREAM.CREATE": ("JSStreamCreateErrF", "error creating store for stream"),
    "STREAM.UPDATE": ("JSStreamUpdateErrF", "stream update failed"),
    "STREAM.DELETE": ("JSStreamDeleteErrF", "stream delete failed"),
    "STREAM.MSG.DELETE": ("JSStreamMsgDeleteFailedF", "message delete failed"),
    "STREAM.SNAPSHOT": ("JSStreamSnapshotErrF", "internal error"),
    "STREAM.RESTORE": ("JSStreamRestoreErrF", "internal error"),
    "CONSUMER.CREATE": ("JSConsumerCreateErrF", "error creating store for consumer"),
    "CONSUMER.DURABLE.CREATE": ("JSConsumerCreateErrF", "error creating store for consumer"),
}


def internal_error(op):
    """The reply for an unexpected failure while handling API op `op` (e.g. "STREAM.PURGE"):
    nats-server's error for that op (JSStreamGeneralErrorF, 500/10051, for the rest) with a
    fixed description."""
    constant, desc = _INTERNAL.get(op, ("JSStreamGeneralErrorF", "internal error"))
    return error(constant, err=desc)


# constant: (code, err_code, description) — from nats-server server/errors.json
CATALOG = {
    'JSAccountResourcesExceededErr': (400, 10002, 'resource limits exceeded for account'),
    'JSBadRequestErr': (400, 10003, 'bad request'),
    'JSClusterIncompleteErr': (503, 10004, 'incomplete results'),
    'JSClusterNoPeersErrF': (400, 10005, '{err}'),
    'JSClusterNotActiveErr': (500, 10006, 'JetStream not in clustered mode'),
    'JSClusterNotAssignedErr': (500, 10007, 'JetStream cluster not assigned to this server'),
    'JSClusterNotAvailErr': (503, 10008, 'JetStream system temporarily unavailable'),
    'JSClusterNotLeaderErr': (500, 10009, 'JetStream cluster can not handle request'),
    'JSClusterRequiredErr': (503, 10010, 'JetStream clustering support required'),
    'JSClusterTagsErr': (400, 10011, 'tags placement not supported for operation'),
    'JSConsumerCreateErrF': (500, 10012, '{err}'),
    'JSConsumerNameExistErr': (400, 10013, 'consumer name already in use'),
    'JSConsumerNotFoundErr': (404, 10014, 'consumer not found'),
    'JSSnapshotDeliverSubjectInvalidErr': (400, 10015, 'deliver subject not valid'),
    'JSConsumerDurableNameNotInSubjectErr': (400, 10016, 'consumer expected to be durable but no durable name set in subject'),
    'JSConsumerDurableNameNotMatchSubjectErr': (400, 10017, 'consumer name in subject does not match durable name in request'),
    'JSConsumerDurableNameNotSetErr': (400, 10018, 'consumer expected to be durable but a durable name was not set'),
    'JSConsumerEphemeralWithDurableInSubjectErr': (400, 10019, 'consumer expected to be ephemeral but detected a durable name set in subject'),
    'JSConsumerEphemeralWithDurableNameErr': (400, 10020, 'consumer expected to be ephemeral but a durable name was set in request'),
    'JSStreamExternalApiOverlapErrF': (400, 10021, 'stream external api prefix {prefix} must not overlap with {subject}'),
    'JSStreamExternalDelPrefixOverlapsErrF': (400, 10022, 'stream external delivery prefix {prefix} overlaps with stream subject {subject}'),
    'JSInsufficientResourcesErr': (503, 10023, 'insufficient resources'),
    'JSStreamInvalidExternalDeliverySubjErrF': (400, 10024, 'stream external delivery prefix {prefix} must not contain wildcards'),
    'JSInvalidJSONErr': (400, 10025, 'invalid JSON: {err}'),
    'JSMaximumConsumersLimitErr': (400, 10026, 'maximum consumers limit reached'),
    'JSMaximumStreamsLimitErr': (400, 10027, 'maximum number of streams reached'),
    'JSMemoryResourcesExceededErr': (500, 10028, 'insufficient memory resources available'),
    'JSMirrorConsumerSetupFailedErrF': (500, 10029, '{err}'),
    'JSMirrorMaxMessageSizeTooBigErr': (400, 10030, 'stream mirror must have max message size >= source'),
    'JSMirrorWithSourcesErr': (400, 10031, 'stream mirrors can not also contain other sources'),
    'JSMirrorWithStartSeqAndTimeErr': (400, 10032, 'stream mirrors can not have both start seq and start time configured'),
    'JSMirrorWithSubjectFiltersErr': (400, 10033, 'stream mirrors can not contain filtered subjects'),
    'JSMirrorWithSubjectsErr': (400, 10034, 'stream mirrors can not contain subjects'),
    'JSNoAccountErr': (503, 10035, 'account not found'),
    'JSClusterUnSupportFeatureErr': (503, 10036, 'not currently supported in clustered mode'),
    'JSNoMessageFoundErr': (404, 10037, 'no message found'),
    'JSNotEmptyRequestErr': (400, 10038, 'expected an empty request payload'),
    'JSNotEnabledForAccountErr': (503, 10039, 'JetStream not enabled for account'),
    'JSClusterPeerNotMemberErr': (400, 10040, 'peer not a member'),
    'JSRaftGeneralErrF': (500, 10041, '{err}'),
    'JSRestoreSubscribeFailedErrF': (500, 10042, 'JetStream unable to subscribe to restore snapshot {subject}: {err}'),
    'JSSequenceNotFoundErrF': (400, 10043, 'sequence {seq} not found'),
    'JSClusterServerNotMemberErr': (400, 10044, 'server is not a member of the cluster'),
    'JSSourceConsumerSetupFailedErrF': (500, 10045, '{err}'),
    'JSSourceMaxMessageSizeTooBigErr': (400, 10046, 'stream source must have max message size >= target'),
    'JSStorageResourcesExceededErr': (500, 10047, 'insufficient storage resources available'),
    'JSStreamAssignmentErrF': (500, 10048, '{err}'),
    'JSStreamCreateErrF': (500, 10049, '{err}'),
    'JSStreamDeleteErrF': (500, 10050, '{err}'),
    'JSStreamGeneralErrorF': (500, 10051, '{err}'),
    'JSStreamInvalidConfigF': (500, 10052, '{err}'),
    'JSStreamLimitsErrF': (500, 10053, '{err}'),
    'JSStreamMessageExceedsMaximumErr': (400, 10054, 'message size exceeds maximum allowed'),
    'JSStreamMirrorNotUpdatableErr': (400, 10055, 'stream mirror configuration can not be updated'),
    'JSStreamMismatchErr': (400, 10056, 'stream name in subject does not match request'),
    'JSStreamMsgDeleteFailedF': (500, 10057, '{err}'),
    'JSStreamNameExistErr': (400, 10058, 'stream name already in use with a different configuration'),
    'JSStreamNotFoundErr': (404, 10059, 'stream not found'),
    'JSStreamNotMatchErr': (400, 10060, 'expected stream does not match'),
    'JSStreamReplicasNotUpdatableErr': (400, 10061, 'Replicas configuration can not be updated'),
    'JSStreamRestoreErrF': (500, 10062, 'restore failed: {err}'),
    'JSStreamSequenceNotMatchErr': (503, 10063, 'expected stream sequence does not match'),
    'JSStreamSnapshotErrF': (500, 10064, 'snapshot failed: {err}'),
    'JSStreamSubjectOverlapErr': (400, 10065, 'subjects overlap with an existing stream'),
    'JSStreamTemplateCreateErrF': (500, 10066, '{err}'),
    'JSStreamTemplateDeleteErrF': (500, 10067, '{err}'),
    'JSStreamTemplateNotFoundErr': (404, 10068, 'template not found'),
    'JSStreamUpdateErrF': (500, 10069, '{err}'),
    'JSStreamWrongLastMsgIDErrF': (400, 10070, 'wrong last msg ID: {id}'),
    'JSStreamWrongLastSequenceErrF': (400, 10071, 'wrong last sequence: {seq}'),
    'JSTempStorageFailedErr': (500, 10072, 'JetStream unable to open temp storage for restore'),
    'JSTemplateNameNotMatchSubjectErr': (400, 10073, 'template name in subject does not match request'),
    'JSStreamReplicasNotSupportedErr': (500, 10074, 'replicas > 1 not supported in non-clustered mode'),
    'JSPeerRemapErr': (503, 10075, 'peer remap failed'),
    'JSNotEnabledErr': (503, 10076, 'JetStream not enabled'),
    'JSStreamStoreFailedF': (503, 10077, '{err}'),
    'JSConsumerConfigRequiredErr': (400, 10078, 'consumer config required'),
    'JSConsumerDeliverToWildcardsErr': (400, 10079, 'consumer deliver subject has wildcards'),
    'JSConsumerPushMaxWaitingErr': (400, 10080, 'consumer in push mode can not set max waiting'),
    'JSConsumerDeliverCycleErr': (400, 10081, 'consumer deliver subject forms a cycle'),
    'JSConsumerMaxPendingAckPolicyRequiredErr': (400, 10082, 'consumer requires ack policy for max ack pending'),
    'JSConsumerSmallHeartbeatErr': (400, 10083, 'consumer idle heartbeat needs to be >= 100ms'),
    'JSConsumerPullRequiresAckErr': (400, 10084, 'consumer in pull mode requires explicit ack policy on workqueue stream'),
    'JSConsumerPullNotDurableErr': (400, 10085, 'consumer in pull mode requires a durable name'),
    'JSConsumerPullWithRateLimitErr': (400, 10086, 'consumer in pull mode can not have rate limit set'),
    'JSConsumerMaxWaitingNegativeErr': (400, 10087, 'consumer max waiting needs to be positive'),
    'JSConsumerHBRequiresPushErr': (400, 10088, 'consumer idle heartbeat requires a push based consumer'),
    'JSConsumerFCRequiresPushErr': (400, 10089, 'consumer flow control requires a push based consumer'),
    'JSConsumerDirectRequiresPushErr': (400, 10090, 'consumer direct requires a push based consumer'),
    'JSConsumerDirectRequiresEphemeralErr': (400, 10091, 'consumer direct requires an ephemeral consumer'),
    'JSConsumerOnMappedErr': (400, 10092, 'consumer direct on a mapped consumer'),
    'JSConsumerFilterNotSubsetErr': (400, 10093, 'consumer filter subject is not a valid subset of the interest subjects'),
    'JSConsumerInvalidPolicyErrF': (400, 10094, '{err}'),
    'JSConsumerInvalidSamplingErrF': (400, 10095, 'failed to parse consumer sampling configuration: {err}'),
    'JSStreamInvalidErr': (500, 10096, 'stream not valid'),
    'JSStreamHeaderExceedsMaximumErr': (400, 10097, 'header size exceeds maximum allowed of 64k'),
    'JSConsumerWQRequiresExplicitAckErr': (400, 10098, 'workqueue stream requires explicit ack'),
    'JSConsumerWQMultipleUnfilteredErr': (400, 10099, 'multiple non-filtered consumers not allowed on workqueue stream'),
    'JSConsumerWQConsumerNotUniqueErr': (400, 10100, 'filtered consumer not unique on workqueue stream'),
    'JSConsumerWQConsumerNotDeliverAllErr': (400, 10101, 'consumer must be deliver all on workqueue stream'),
    'JSConsumerNameTooLongErrF': (400, 10102, 'consumer name is too long, maximum allowed is {max}'),
    'JSConsumerBadDurableNameErr': (400, 10103, "durable name can not contain '.', '*', '>'"),
    'JSConsumerStoreFailedErrF': (500, 10104, 'error creating store for consumer: {err}'),
    'JSConsumerExistingActiveErr': (400, 10105, 'consumer already exists and is still active'),
    'JSConsumerReplacementWithDifferentNameErr': (400, 10106, 'consumer replacement durable config not the same'),
    'JSConsumerDescriptionTooLongErrF': (400, 10107, 'consumer description is too long, maximum allowed is {max}'),
    'JSConsumerWithFlowControlNeedsHeartbeats': (400, 10108, 'consumer with flow control also needs heartbeats'),
    'JSStreamSealedErr': (400, 10109, 'invalid operation on sealed stream'),
    'JSStreamPurgeFailedF': (500, 10110, '{err}'),
    'JSStreamRollupFailedF': (500, 10111, '{err}'),
    'JSConsumerInvalidDeliverSubject': (400, 10112, 'invalid push consumer deliver subject'),
    'JSStreamMaxBytesRequired': (400, 10113, 'account requires a stream config to have max bytes set'),
    'JSConsumerMaxRequestBatchNegativeErr': (400, 10114, 'consumer max request batch needs to be > 0'),
    'JSConsumerMaxRequestExpiresTooSmall': (400, 10115, 'consumer max request expires needs to be >= 1ms'),
    'JSConsumerMaxDeliverBackoffErr': (400, 10116, 'max deliver is required to be > length of backoff values'),
    'JSStreamInfoMaxSubjectsErr': (500, 10117, 'subject details would exceed maximum allowed'),
    'JSStreamOfflineErr': (500, 10118, 'stream is offline'),
    'JSConsumerOfflineErr': (500, 10119, 'consumer is offline'),
    'JSNoLimitsErr': (400, 10120, 'no JetStream default or applicable tiered limit present'),
    'JSConsumerMaxPendingAckExcessErrF': (400, 10121, 'consumer max ack pending exceeds system limit of {limit}'),
    'JSStreamMaxStreamBytesExceeded': (400, 10122, 'stream max bytes exceeds account limit max stream bytes'),
    'JSStreamMoveAndScaleErr': (400, 10123, 'can not move and scale a stream in a single update'),
    'JSStreamMoveInProgressErr': (400, 10124, 'stream move already in progress'),
    'JSConsumerMaxRequestBatchExceededF': (400, 10125, 'consumer max request batch exceeds server limit of {limit}'),
    'JSConsumerReplicasExceedsStream': (400, 10126, 'consumer config replica count exceeds parent stream'),
    'JSConsumerNameContainsPathSeparatorsErr': (400, 10127, 'Consumer name can not contain path separators'),
    'JSStreamNameContainsPathSeparatorsErr': (400, 10128, 'Stream name can not contain path separators'),
    'JSStreamReconfigureNotInProgressErr': (400, 10129, 'stream reconfiguration not in progress'),
    'JSStreamNameExistRestoreFailedErr': (400, 10130, 'stream name already in use, cannot restore'),
    'JSConsumerCreateFilterSubjectMismatchErr': (400, 10131, 'Consumer create request did not match filtered subject from create subject'),
    'JSConsumerCreateDurableAndNameMismatch': (400, 10132, 'Consumer Durable and Name have to be equal if both are provided'),
    'JSReplicasCountCannotBeNegative': (400, 10133, 'replicas count cannot be negative'),
    'JSConsumerReplicasShouldMatchStream': (400, 10134, "consumer config replicas must match interest retention stream's replicas"),
    'JSConsumerMetadataLengthErrF': (400, 10135, 'consumer metadata exceeds maximum size of {limit}'),
    'JSConsumerDuplicateFilterSubjects': (400, 10136, 'consumer cannot have both FilterSubject and FilterSubjects specified'),
    'JSConsumerMultipleFiltersNotAllowed': (400, 10137, 'consumer with multiple subject filters cannot use subject based API'),
    'JSConsumerOverlappingSubjectFilters': (400, 10138, 'consumer subject filters cannot overlap'),
    'JSConsumerEmptyFilter': (400, 10139, 'consumer filter in FilterSubjects cannot be empty'),
    'JSSourceDuplicateDetected': (400, 10140, 'duplicate source configuration detected'),
    'JSSourceInvalidStreamName': (400, 10141, 'sourced stream name is invalid'),
    'JSMirrorInvalidStreamName': (400, 10142, 'mirrored stream name is invalid'),
    'JSMirrorWithFirstSeqErr': (400, 10143, 'stream mirrors can not have first sequence configured'),
    'JSSourceMultipleFiltersNotAllowed': (400, 10144, 'source with multiple subject transforms cannot also have a single subject filter'),
    'JSSourceInvalidSubjectFilter': (400, 10145, 'source transform source: {err}'),
    'JSSourceInvalidTransformDestination': (400, 10146, 'source transform: {err}'),
    'JSSourceOverlappingSubjectFilters': (400, 10147, 'source filters can not overlap'),
    'JSConsumerAlreadyExists': (400, 10148, 'consumer already exists'),
    'JSConsumerDoesNotExist': (400, 10149, 'consumer does not exist'),
    'JSMirrorMultipleFiltersNotAllowed': (400, 10150, 'mirror with multiple subject transforms cannot also have a single subject filter'),
    'JSMirrorInvalidSubjectFilter': (400, 10151, 'mirror transform source: {err}'),
    'JSMirrorOverlappingSubjectFilters': (400, 10152, 'mirror subject filters can not overlap'),
    'JSConsumerInactiveThresholdExcess': (400, 10153, 'consumer inactive threshold exceeds system limit of {limit}'),
    'JSMirrorInvalidTransformDestination': (400, 10154, 'mirror transform: {err}'),
    'JSStreamTransformInvalidSource': (400, 10155, 'stream transform source: {err}'),
    'JSStreamTransformInvalidDestination': (400, 10156, 'stream transform: {err}'),
    'JSPedanticErrF': (400, 10157, 'pedantic mode: {err}'),
    'JSStreamDuplicateMessageConflict': (409, 10158, 'duplicate message id is in process'),
    'JSConsumerPriorityPolicyWithoutGroup': (400, 10159, 'Setting PriorityPolicy requires at least one PriorityGroup to be set'),
    'JSConsumerInvalidPriorityGroupErr': (400, 10160, 'Provided priority group does not exist for this consumer'),
    'JSConsumerEmptyGroupName': (400, 10161, 'Group name cannot be an empty string'),
    'JSConsumerInvalidGroupNameErr': (400, 10162, 'Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters'),
    'JSStreamExpectedLastSeqPerSubjectNotReady': (503, 10163, 'expected last sequence per subject temporarily unavailable'),
    'JSStreamWrongLastSequenceConstantErr': (400, 10164, 'wrong last sequence'),
    'JSMessageTTLInvalidErr': (400, 10165, 'invalid per-message TTL'),
    'JSMessageTTLDisabledErr': (400, 10166, 'per-message TTL is disabled'),
    'JSStreamTooManyRequests': (429, 10167, 'too many requests'),
    'JSMessageIncrDisabledErr': (400, 10168, 'message counters is disabled'),
    'JSMessageIncrMissingErr': (400, 10169, 'message counter increment is missing'),
    'JSMessageIncrPayloadErr': (400, 10170, 'message counter has payload'),
    'JSMessageIncrInvalidErr': (400, 10171, 'message counter increment is invalid'),
    'JSMessageCounterBrokenErr': (400, 10172, 'message counter is broken'),
    'JSMirrorWithCountersErr': (400, 10173, 'stream mirrors can not also calculate counters'),
    'JSAtomicPublishDisabledErr': (400, 10174, 'atomic publish is disabled'),
    'JSAtomicPublishMissingSeqErr': (400, 10175, 'atomic publish sequence is missing'),
    'JSAtomicPublishIncompleteBatchErr': (400, 10176, 'atomic publish batch is incomplete'),
    'JSAtomicPublishUnsupportedHeaderBatchErr': (400, 10177, 'atomic publish unsupported header used: {header}'),
    'JSConsumerPushWithPriorityGroupErr': (400, 10178, 'priority groups can not be used with push consumers'),
    'JSAtomicPublishInvalidBatchIDErr': (400, 10179, 'atomic publish batch ID is invalid'),
    'JSStreamMinLastSeqErr': (412, 10180, 'min last sequence'),
    'JSConsumerAckPolicyInvalidErr': (400, 10181, 'consumer ack policy invalid'),
    'JSConsumerReplayPolicyInvalidErr': (400, 10182, 'consumer replay policy invalid'),
    'JSConsumerAckWaitNegativeErr': (400, 10183, 'consumer ack wait needs to be positive'),
    'JSConsumerBackOffNegativeErr': (400, 10184, 'consumer backoff needs to be positive'),
    'JSRequiredApiLevelErr': (412, 10185, 'JetStream minimum api level required'),
    'JSMirrorWithMsgSchedulesErr': (400, 10186, 'stream mirrors can not also schedule messages'),
    'JSSourceWithMsgSchedulesErr': (400, 10187, 'stream source can not also schedule messages'),
    'JSMessageSchedulesDisabledErr': (400, 10188, 'message schedules is disabled'),
    'JSMessageSchedulesPatternInvalidErr': (400, 10189, 'message schedules pattern is invalid'),
    'JSMessageSchedulesTargetInvalidErr': (400, 10190, 'message schedules target is invalid'),
    'JSMessageSchedulesTTLInvalidErr': (400, 10191, 'message schedules invalid per-message TTL'),
    'JSMessageSchedulesRollupInvalidErr': (400, 10192, 'message schedules invalid rollup'),
    'JSStreamExpectedLastSeqPerSubjectInvalid': (400, 10193, 'missing sequence for expected last sequence per subject'),
    'JSStreamOfflineReasonErrF': (500, 10194, 'stream is offline: {err}'),
    'JSConsumerOfflineReasonErrF': (500, 10195, 'consumer is offline: {err}'),
    'JSConsumerPriorityGroupWithPolicyNone': (400, 10196, 'consumer can not have priority groups when policy is none'),
    'JSConsumerPinnedTTLWithoutPriorityPolicyNone': (400, 10197, 'PinnedTTL cannot be set when PriorityPolicy is none'),
    'JSMirrorWithAtomicPublishErr': (400, 10198, 'stream mirrors can not also use atomic publishing'),
    'JSAtomicPublishTooLargeBatchErrF': (400, 10199, 'atomic publish batch is too large: {size}'),
    'JSAtomicPublishInvalidBatchCommitErr': (400, 10200, 'atomic publish batch commit is invalid'),
    'JSAtomicPublishContainsDuplicateMessageErr': (400, 10201, 'atomic publish batch contains duplicate message id'),
    'JSClusterServerMemberChangeInflightErr': (400, 10202, 'cluster member change is in progress'),
    'JSMessageSchedulesSourceInvalidErr': (400, 10203, 'message schedules source is invalid'),
    'JSConsumerInvalidResetErr': (400, 10204, 'invalid reset: {err}'),
    'JSBatchPublishDisabledErr': (400, 10205, 'batch publish is disabled'),
    'JSBatchPublishInvalidPatternErr': (400, 10206, 'batch publish pattern is invalid'),
    'JSBatchPublishInvalidBatchIDErr': (400, 10207, 'batch publish ID is invalid'),
    'JSBatchPublishUnknownBatchIDErr': (400, 10208, 'batch publish ID unknown'),
    'JSMirrorWithBatchPublishErr': (400, 10209, 'stream mirrors can not also use batch publishing'),
    'JSAtomicPublishTooManyInflight': (429, 10210, 'atomic publish too many inflight'),
    'JSBatchPublishTooManyInflight': (429, 10211, 'batch publish too many inflight'),
    'JSMessageSchedulesSchedulerInvalidErr': (400, 10212, 'message schedules invalid scheduler'),
    'JSMirrorDurableConsumerCfgInvalid': (400, 10213, 'stream mirror consumer config is invalid'),
    'JSMirrorConsumerRequiresAckFCErr': (400, 10214, 'stream mirror consumer requires flow control ack policy'),
    'JSSourceDurableConsumerCfgInvalid': (400, 10215, 'stream source consumer config is invalid'),
    'JSSourceDurableConsumerDuplicateDetected': (400, 10216, 'duplicate stream source consumer detected'),
    'JSSourceConsumerRequiresAckFCErr': (400, 10217, 'stream source consumer requires flow control ack policy'),
    'JSConsumerAckFCRequiresPushErr': (400, 10218, 'flow control ack policy requires a push based consumer'),
    'JSConsumerAckFCRequiresFCErr': (400, 10219, 'flow control ack policy requires flow control'),
    'JSConsumerAckFCRequiresMaxAckPendingErr': (400, 10220, 'flow control ack policy requires max ack pending'),
    'JSConsumerAckFCRequiresNoAckWaitErr': (400, 10221, 'flow control ack policy requires unset ack wait'),
    'JSConsumerAckFCRequiresNoMaxDeliverErr': (400, 10222, 'flow control ack policy requires unset max deliver'),
    'JSMessageSchedulesTimeZoneInvalidErr': (400, 10223, 'message schedules time zone is invalid'),
    'JSClusterRescueErr': (400, 10224, 'JetStream system rescue not applied: {err}'),
    'JSConsumerStreamIdentityMismatchF': (400, 10225, "consumer's stream identity does not match: {msg}"),
    'JSStreamReconfigureInProgressErr': (400, 10226, 'stream reconfiguration already in progress'),
    'JSMessageSourceHdrNotAllowedErr': (400, 10227, 'message stream source header is not allowed'),
}

BY_ERR_CODE = {v[1]: k for k, v in CATALOG.items()}
