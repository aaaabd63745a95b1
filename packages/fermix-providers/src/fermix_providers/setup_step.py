"""The ``provider`` step of ``fermix setup``: pick a provider, configure it, make it primary.

Interactive and flag-driven runs share one path (``SetupContext.ask`` returns a flag value,
prompts, or names the flag to pass). What the step writes follows the spec:

* The provider configured here becomes primary and the old primary flag is cleared; the old
  provider keeps its settings and credentials and turns into a fallback.
* The API key goes into the document as plaintext; ``run_setup`` moves it to the keyring
  before anything is written, so config.toml never holds it.
* Reasoning effort is offered only for providers that take one, and only the levels the
  chosen model accepts. OpenRouter and Ollama models come from the live listing when it is
  reachable (the static catalog otherwise), with free-form input always allowed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from fermix_core.setup import SetupContext, SetupError, SetupInputError
from fermix_core.setup_secrets import (
    choose_storage,
    reference_from_flags,
    require_plaintext_storage,
)
from fermix_core.specs import REASONING_EFFORTS, ProviderSpec

__all__ = ["PROVIDER_FLAGS", "provider_statuses", "provider_step"]

PROVIDER_FLAGS = (
    "--provider",
    "--api-key",
    "--api-key-env",
    "--api-key-command",
    "--auth-mode",
    "--model",
    "--base-url",
    "--reasoning-effort",
)
#: How many wrong answers an interactive prompt takes before the step gives up.
_ATTEMPTS = 5
#: Live listings can hold hundreds of models; the picker numbers the first ones.
_LISTED = 25
PRIMARY, FALLBACK, NOT_CONFIGURED = "Primary", "Fallback", "Not configured"
_ALIASES = {"codex": "openai_codex", "grok": "xai", "claude": "anthropic"}


def provider_step(context: SetupContext) -> None:
    specs = sorted(context.registry.typed(ProviderSpec).values(), key=lambda s: (s.order, s.name))
    if not specs:
        context.notes.append(
            "No provider plugins are installed; install fermix-providers, then run "
            "`fermix setup` again"
        )
        return
    spec = _choose(context, specs)
    if spec is None:
        return
    block = context.table("fermix_core", "providers", spec.name)
    if context.interactive:
        context.io.echo(f"Configuring {spec.label or spec.name}")
    _configure_auth(context, spec, block)
    _configure_base_url(context, spec, block)
    model = _configure_model(context, spec, block)
    _configure_effort(context, spec, block, model)
    _make_primary(context, spec)


# --------------------------------------------------------------------------- status


def provider_statuses(context: SetupContext, specs: Sequence[ProviderSpec]) -> dict[str, str]:
    """Primary / Fallback / Not configured for each provider, as the document stands."""
    blocks = _blocks(context.document)
    flagged = [n for n, b in blocks.items() if b.get("primary") is True]
    legacy = _get(_get(context.document, "fermix_core"), "agent")
    primary = flagged[0] if flagged else _get(legacy, "provider")
    profiles = _stored_profiles(context)
    result = {}
    for spec in specs:
        if spec.name == primary:
            result[spec.name] = PRIMARY
        elif _configured(context, spec, blocks.get(spec.name), profiles):
            # Routing only falls back when something is primary; before that, a provider
            # known only from the environment is just available, not a fallback.
            env = spec.base_url_env if spec.keyless else spec.env_var
            if primary is None and spec.name not in blocks and env:
                result[spec.name] = f"{NOT_CONFIGURED} (${env} is set)"
            else:
                result[spec.name] = FALLBACK
        else:
            result[spec.name] = NOT_CONFIGURED
    return result


def _configured(context: SetupContext, spec: ProviderSpec, block: Any, profiles: set[str]) -> bool:
    env = context.assembly.environ
    block = block if isinstance(block, Mapping) else {}
    if spec.keyless or spec.auth_modes == ("none",):
        return bool(block.get("base_url")) or bool(
            spec.base_url_env and env.get(spec.base_url_env, "").strip()
        )
    mode = block.get("auth_mode") or (spec.auth_modes[0] if spec.auth_modes else "api_key")
    if mode == "oauth":
        return _profile_for(spec.name) in profiles
    return bool(block.get("api_key")) or bool(spec.env_var and env.get(spec.env_var, "").strip())


def _stored_profiles(context: SetupContext) -> set[str]:
    from fermix_core.authfile import AuthFileError, AuthStore

    try:
        return set(AuthStore(context.home.auth_file).profiles())
    except (AuthFileError, OSError):
        return set()


def _profile_for(provider: str) -> str:
    from fermix_providers.oauth.tokens import PROVIDER_PROFILES

    return PROVIDER_PROFILES.get(provider, f"{provider}_oauth")


# --------------------------------------------------------------------------- choosing


def _choose(context: SetupContext, specs: Sequence[ProviderSpec]) -> ProviderSpec | None:
    by_name = {s.name: s for s in specs}
    if "--provider" in context.options:
        return _match(context.option("--provider"), specs, by_name, strict=True)
    if not context.interactive:
        given = [f for f in PROVIDER_FLAGS[1:] if f in context.options]
        if given:
            raise SetupInputError(
                f"{', '.join(given)} configure a provider: pass --provider NAME as well "
                f"(one of: {', '.join(by_name)})"
            )
        statuses = provider_statuses(context, specs)
        primary = next((n for n, s in statuses.items() if s == PRIMARY), None)
        if primary:
            context.notes.append(f"Provider: {primary} stays primary (pass --provider to change)")
        else:
            context.notes.append(
                "No model provider is configured yet; run `fermix setup --provider NAME "
                "--api-key KEY` (or `fermix auth login` for a ChatGPT subscription)"
            )
        return None
    statuses = provider_statuses(context, specs)
    width = max(len(s.label or s.name) for s in specs)
    context.io.echo("Providers (the one you configure becomes primary):")
    for number, spec in enumerate(specs, 1):
        label = (spec.label or spec.name).ljust(width)
        context.io.echo(f"  {number}. {label}  [{spec.name}]  {statuses[spec.name]}")
    current = next((n for n, s in statuses.items() if s == PRIMARY), specs[0].name)
    for _ in range(_ATTEMPTS):
        answer = context.ask("--provider", "Provider (number or name)", default=current)
        chosen = _match(answer, specs, by_name, strict=False)
        if chosen is not None:
            return chosen
        context.io.echo(
            f"  {answer!r} is not a provider{_guess(str(answer).strip().lower(), by_name)}; "
            "type a number from the list or a name"
        )
    raise SetupError("no provider was chosen; run `fermix setup` again")


def _match(
    answer: Any, specs: Sequence[ProviderSpec], by_name: Mapping[str, ProviderSpec], *, strict: bool
) -> ProviderSpec | None:
    text = str(answer).strip().lower()
    if text.isdigit() and 1 <= int(text) <= len(specs):
        return specs[int(text) - 1]
    spec = by_name.get(_ALIASES.get(text, text))
    if spec is None and strict:
        raise SetupError(
            f"unknown provider {str(answer)!r} for --provider{_guess(text, by_name)}; "
            f"choose one of: {', '.join(by_name)}"
        )
    return spec


def _guess(text: str, by_name: Mapping[str, ProviderSpec]) -> str:
    """`` (did you mean "openrouter"?)`` for a near miss such as ``openruter``, else ``""``."""
    from fermix_core.config.messages import did_you_mean

    guess = did_you_mean(text, [*by_name, *_ALIASES])
    return f' (did you mean "{_ALIASES.get(guess, guess)}"?)' if guess else ""


# --------------------------------------------------------------------------- credentials


def _configure_auth(context: SetupContext, spec: ProviderSpec, block: Any) -> None:
    key_flags = [
        f for f in ("--api-key", "--api-key-env", "--api-key-command") if f in context.options
    ]
    if spec.keyless or spec.auth_modes == ("none",):
        if key_flags:
            raise SetupError(f"{spec.name} is keyless; drop {key_flags[0]}")
        return
    if "oauth" in spec.auth_modes and "api_key" not in spec.auth_modes:
        _oauth_only(context, spec)
        return
    mode = "api_key"
    if "oauth" in spec.auth_modes:
        current = str(block.get("auth_mode") or "api_key")
        if "--auth-mode" in context.options:
            mode = str(context.option("--auth-mode")).strip().lower()
            if mode not in spec.auth_modes:
                raise SetupError(
                    f"--auth-mode for {spec.name} is one of: {', '.join(spec.auth_modes)}"
                )
            if mode == "oauth" and "--api-key" in context.options:
                raise SetupError("--api-key goes with --auth-mode api_key, not oauth")
        elif "--api-key" in context.options:
            mode = "api_key"
        elif context.interactive:
            mode = _pick(
                context,
                "Authenticate with an API key or a subscription login (api_key/oauth)",
                ("api_key", "oauth"),
                current,
            )
        else:
            mode = current
        if mode != current or "auth_mode" in block:
            if mode != current:
                context.notes.append(f"{spec.name}: auth_mode changed from {current} to {mode}")
            block["auth_mode"] = mode
    if mode == "oauth":
        if _profile_for(spec.name) not in _stored_profiles(context):
            context.notes.append(
                f"{spec.name} uses a subscription login: run "
                f"`fermix auth login --provider {spec.name}` to sign in"
            )
        return
    _ask_key(context, spec, block)


def _oauth_only(context: SetupContext, spec: ProviderSpec) -> None:
    if "--api-key" in context.options:
        raise SetupError(
            f"{spec.name} signs in with your subscription, not an API key; drop --api-key and "
            f"run `fermix auth login --provider {spec.name}`"
        )
    if _profile_for(spec.name) in _stored_profiles(context):
        context.notes.append(f"{spec.name}: using the stored subscription login")
    else:
        context.notes.append(
            f"{spec.name} needs a subscription login: run "
            f"`fermix auth login --provider {spec.name}` (no API key is used)"
        )


def _ask_key(context: SetupContext, spec: ProviderSpec, block: Any) -> None:
    label = spec.label or spec.name
    what = f"{label} API key"
    stored = bool(block.get("api_key"))
    env_var = spec.env_var
    from_env = bool(env_var and context.assembly.environ.get(env_var, "").strip())
    reference = reference_from_flags(context, "--api-key", label=what)
    if reference is not None:
        block["api_key"] = reference
        return
    if "--api-key" in context.options:
        key = _checked_key(spec, str(context.option("--api-key")))
        require_plaintext_storage(context, "--api-key", label=what)
        block["api_key"] = key
        return
    if not context.interactive:
        if stored or from_env:
            return
        hint = f" or set {env_var}" if env_var else ""
        raise SetupInputError(
            f"{label} needs an API key: pass --api-key KEY (or --api-key-env NAME, "
            f"--api-key-command CMD){hint}"
        )
    # Where the key will be kept is settled before it is typed: with no keyring writer the
    # operator chooses config.toml (confirmed), an env reference or a helper command.
    storage = choose_storage(
        context, "--api-key", label=what, env_var=env_var, can_keep=stored or from_env
    )
    if storage.kind == "keep":
        return
    if storage.kind == "reference":
        block["api_key"] = storage.value
        return
    if stored:
        prompt = f"{label} API key (blank keeps the stored key)"
    elif from_env:
        prompt = f"{label} API key (blank uses ${env_var})"
    else:
        prompt = f"{label} API key"
    for _ in range(_ATTEMPTS):
        answer = context.ask("--api-key", prompt, default="", secret=True)
        if answer:
            try:
                block["api_key"] = _checked_key(spec, answer)
            except SetupError as exc:
                context.io.echo(f"  {exc}")
                continue
            return
        if stored or from_env:
            return
        context.io.echo("  An API key is required for this provider.")
    raise SetupError(f"no API key was given for {label}; run `fermix setup` again")


def _checked_key(spec: ProviderSpec, value: str) -> str:
    key = value.strip()
    if not key:
        raise SetupError(f"--api-key for {spec.name} is empty")
    if any(ch.isspace() for ch in key):
        raise SetupError("that API key contains spaces; paste only the key itself")
    if spec.name == "anthropic" and key.startswith("sk-ant-oat"):
        raise SetupError(
            "that is a Claude subscription token, not an API key; store it with "
            "`fermix auth login --provider anthropic --setup-token`"
        )
    return key


# --------------------------------------------------------------------------- base URL


def _configure_base_url(context: SetupContext, spec: ProviderSpec, block: Any) -> None:
    if "--base-url" in context.options:
        block["base_url"] = _checked_url(str(context.option("--base-url")))
        return
    if not (spec.keyless or spec.auth_modes == ("none",)):
        _offer_base_url(context, spec, block)
        return
    env_url = context.assembly.environ.get(spec.base_url_env or "", "").strip()
    current = block.get("base_url") or env_url or spec.default_base_url
    if context.interactive:
        _ask_url(context, spec, block, "Server URL", default=str(current))
        return
    if not block.get("base_url") and not env_url and spec.default_base_url:
        # Presence of base_url is what marks a keyless provider configured.
        block["base_url"] = spec.default_base_url


#: Wires an OpenAI-compatible gateway or proxy speaks; their providers get the question.
_COMPATIBLE_WIRES = ("responses", "chat_completions")


def _offer_base_url(context: SetupContext, spec: ProviderSpec, block: Any) -> None:
    """Interactive only: an OpenAI-compatible provider may point at a gateway instead.

    Blank keeps what is configured (the provider's own API when nothing is).
    """
    if not context.interactive or "base_url" not in spec.config_keys:
        return
    if spec.wire not in _COMPATIBLE_WIRES or block.get("auth_mode") == "oauth":
        return
    current = block.get("base_url")
    keep = (
        f"blank keeps {current}"
        if current
        else f"blank uses {spec.default_base_url or 'the provider default'}"
    )
    _ask_url(context, spec, block, f"Base URL of a compatible gateway ({keep})", default="")


def _ask_url(
    context: SetupContext, spec: ProviderSpec, block: Any, prompt: str, default: str
) -> None:
    """Ask until a usable http(s) URL is given; a blank answer (no default) changes nothing."""
    for _ in range(_ATTEMPTS):
        answer = context.ask("--base-url", prompt, default=default)
        if not answer.strip():
            return
        try:
            block["base_url"] = _checked_url(answer)
            return
        except SetupError as exc:
            context.io.echo(f"  {exc}")
    raise SetupError(f"no usable server URL was given for {spec.name}; run `fermix setup` again")


def _checked_url(value: str) -> str:
    url = value.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SetupError(f"{url!r} is not an http(s) URL such as http://localhost:11434/v1")
    return url.rstrip("/")


# --------------------------------------------------------------------------- model


def _configure_model(context: SetupContext, spec: ProviderSpec, block: Any) -> str:
    current = str(block.get("default_model") or spec.default_model or "")
    if "--model" in context.options:
        model = str(context.option("--model")).strip()
        if not model:
            raise SetupError("--model is empty; pass a model id such as " + (current or "gpt-5.6"))
        block["default_model"] = model
        return model
    if not context.interactive:
        if current and "default_model" not in block:
            block["default_model"] = current
        return current
    choices, listed = _model_choices(context, spec, block)
    if listed is not None and choices and current not in choices:
        current = choices[0]
    context.io.echo("Models:")
    for number, model_id in enumerate(choices[:_LISTED], 1):
        context.io.echo(f"  {number}. {model_id}")
    if len(choices) > _LISTED:
        context.io.echo(f"  … and {len(choices) - _LISTED} more (type any id)")
    answer = context.ask("--model", "Model (number or id)", default=current or None).strip()
    model = answer
    if answer.isdigit() and 1 <= int(answer) <= min(len(choices), _LISTED):
        model = choices[int(answer) - 1]
    if listed is not None and spec.name == "ollama" and model not in listed:
        context.notes.append(f"{model} is not pulled on the Ollama server: `ollama pull {model}`")
    block["default_model"] = model
    return model


def _model_choices(
    context: SetupContext, spec: ProviderSpec, block: Any
) -> tuple[list[str], list[str] | None]:
    """Model ids to offer, and the live list when one was fetched (``None`` otherwise)."""
    static = [m.id for m in spec.models]
    if spec.name not in ("openrouter", "ollama"):
        return static, None
    listing = _live_listing(context, spec, block)
    if listing is None:
        return static, None
    if listing.error:
        context.io.echo(f"  Could not list models: {listing.error}")
        context.io.echo("  Choose from the catalog below or type any model id.")
        return static, None
    ids = list(listing.ids)
    if spec.name == "ollama":
        if not ids:
            context.io.echo("  The Ollama server has no models; pull one (`ollama pull qwen3`).")
            return static, ids
        return ids, ids
    return ids or static, ids


def _live_listing(context: SetupContext, spec: ProviderSpec, block: Any) -> Any:
    try:
        from fermix_providers import listing
    except ImportError:  # pragma: no cover - listing ships with this package
        return None
    import anyio

    env = context.assembly.environ
    base_url = block.get("base_url") or (
        env.get(spec.base_url_env, "").strip() if spec.base_url_env else ""
    )
    key = block.get("api_key")
    api_key = key if isinstance(key, str) and not key.startswith("@") else None
    if spec.name == "openrouter":
        base_url = base_url or None
        return _run(anyio, listing.list_openrouter_models, base_url=base_url, api_key=api_key)
    return _run(anyio, listing.list_ollama_models, base_url or spec.default_base_url)


def _run(anyio: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
    async def call() -> Any:
        return await func(*args, **kwargs)

    try:
        return anyio.run(call)
    except RuntimeError:  # already inside an event loop (an embedding app): skip the listing
        return None


# --------------------------------------------------------------------------- effort


def _effort_rules() -> Any:
    try:
        from fermix_core.routing import effort
    except ImportError:  # pragma: no cover - a core without routing.effort
        from fermix_providers import catalog as effort
    return effort


def _accepted(spec: ProviderSpec, model: str | None) -> tuple[str, ...]:
    return tuple(_effort_rules().accepted_efforts(spec, model or None))


def _configure_effort(context: SetupContext, spec: ProviderSpec, block: Any, model: str) -> None:
    flag = context.option("--reasoning-effort")
    if not spec.reasoning_efforts:
        if flag is not None:
            raise SetupError(
                f"{spec.name} takes no reasoning effort (the server default applies); "
                "drop --reasoning-effort"
            )
        return
    accepted = _accepted(spec, model)
    current = block.get("reasoning_effort")
    if flag is not None:
        wanted = str(flag).strip().lower()
        block["reasoning_effort"] = _checked_effort(spec, model, wanted, accepted)
        return
    if current is not None and current not in accepted:
        fixed = None
        if current in REASONING_EFFORTS:
            fixed = _effort_rules().clamp_effort(spec, model, str(current))
        if fixed is None:
            del block["reasoning_effort"]
        else:
            block["reasoning_effort"] = fixed
        context.notes.append(
            f"{spec.name}: reasoning_effort {current} is not accepted by {model}; "
            f"{'changed to ' + fixed if fixed else 'removed'}"
        )
        current = fixed
    if not context.interactive:
        return
    keep = f"blank keeps {current}" if current else "blank leaves the provider default"
    context.io.echo(f"Reasoning effort for {model}: {', '.join(accepted)} ({keep})")
    for _ in range(_ATTEMPTS):
        answer = context.ask("--reasoning-effort", "Reasoning effort", default="").strip().lower()
        if not answer:
            return
        try:
            block["reasoning_effort"] = _checked_effort(spec, model, answer, accepted)
            return
        except SetupError as exc:
            context.io.echo(f"  {exc}")
    raise SetupError("no valid reasoning effort was given; run `fermix setup` again")


def _checked_effort(spec: ProviderSpec, model: str, value: str, accepted: Sequence[str]) -> str:
    if value in accepted:
        return value
    if value in REASONING_EFFORTS and value in spec.reasoning_efforts:
        reason = f"{model} tops out below {value}"
    elif value in REASONING_EFFORTS:
        reason = f"{spec.name} does not take {value}"
    else:
        reason = f"{value!r} is not a reasoning effort"
    raise SetupError(f"{reason}; choose one of: {', '.join(accepted)}")


# --------------------------------------------------------------------------- primary


def _make_primary(context: SetupContext, spec: ProviderSpec) -> None:
    previous = []
    for name, block in _blocks(context.document).items():
        if name != spec.name and block.get("primary") is True:
            block["primary"] = False
            previous.append(name)
    context.table("fermix_core", "providers", spec.name)["primary"] = True
    if previous:
        context.notes.append(
            f"{spec.name} is now the primary provider; {', '.join(previous)} keeps its settings "
            "and credentials and becomes a fallback"
        )
    else:
        context.notes.append(f"{spec.name} is the primary provider")
    context.notes.append(
        "Provider changes take effect at the next daemon start (`fermix restart` if one runs)"
    )


# --------------------------------------------------------------------------- helpers


def _pick(context: SetupContext, prompt: str, options: Sequence[str], default: str) -> str:
    for _ in range(_ATTEMPTS):
        answer = context.ask("--auth-mode", prompt, default=default).strip().lower()
        if answer in options:
            return answer
        context.io.echo(f"  choose one of: {', '.join(options)}")
    raise SetupError(f"no valid answer to {prompt!r}; run `fermix setup` again")


def _get(node: Any, key: str) -> Any:
    if isinstance(node, Mapping):
        return node.get(key)
    return None


def _blocks(document: Any) -> dict[str, Any]:
    providers = _get(_get(document, "fermix_core"), "providers")
    if not isinstance(providers, Mapping):
        return {}
    return {name: block for name, block in providers.items() if isinstance(block, Mapping)}
