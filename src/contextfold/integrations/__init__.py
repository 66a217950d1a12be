"""Adapters that put a ContextManager inside other people's agent loops.

Each module guards its own optional import and names the extra to install:

- ``contextfold.integrations.openai_client`` — OpenAI client wrapper (``contextfold[openai]``)
- ``contextfold.integrations.anthropic_client`` — Anthropic client wrapper (``contextfold[anthropic]``)
- ``contextfold.integrations.litellm_client`` — LiteLLM completion wrapper (``contextfold[litellm]``)
- ``contextfold.integrations.openai_agents`` — Agents SDK input filter and Session (``contextfold[openai-agents]``)
- ``contextfold.integrations.langchain`` — LangChain v1 AgentMiddleware (``contextfold[langchain]``)
- ``contextfold.integrations.pydantic_ai`` — pydantic-ai history processor (``contextfold[pydantic-ai]``)
- ``contextfold.integrations.slash`` — ``/compact`` and ``/context`` for interactive agents

Nothing is imported here, so naming one adapter never loads another's framework.
"""
