"""WhatsApp: Cloud API webhooks under ``/webhook/whatsapp``."""
