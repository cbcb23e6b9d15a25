"""Words and number formats of the computed tables, per page language (ru, uz, en)."""

from __future__ import annotations

import re

# One number format for the pages, the calculator's results and its worker: sizing.view's.
from sizing.view import fmt_gib, fmt_int, fmt_num

LABELS: dict[str, dict[str, str]] = {
    "weights": {"ru": "Базовые веса", "uz": "Asosiy vaznlar", "en": "Base weights"},
    "quantization_state": {"ru": "Состояние квантизации", "uz": "Kvantlash holati", "en": "Quantization state"},
    "adapters": {"ru": "Адаптеры", "uz": "Adapterlar", "en": "Adapters"},
    "gradients": {"ru": "Градиенты", "uz": "Gradiyentlar", "en": "Gradients"},
    "optimizer_states": {"ru": "Состояния оптимизатора", "uz": "Optimizator holatlari", "en": "Optimizer states"},
    "master_weights": {"ru": "Мастер-копии весов", "uz": "Vaznlarning master nusxalari", "en": "Master weights"},
    "activations": {"ru": "Активации", "uz": "Aktivatsiyalar", "en": "Activations"},
    "logits_and_loss": {"ru": "Логиты и функция потерь", "uz": "Logitlar va yo‘qotish funksiyasi",
                        "en": "Logits and loss"},
    "workspace": {"ru": "Рабочие буферы", "uz": "Ishchi buferlar", "en": "Workspace"},
    "allocated": {"ru": "Выделено (allocated)", "uz": "Ajratilgan (allocated)", "en": "Allocated"},
    "reserved": {"ru": "Зарезервировано (reserved)", "uz": "Zaxiralangan (reserved)", "en": "Reserved"},
    "device": {"ru": "На устройстве (nvidia-smi)", "uz": "Qurilmada (nvidia-smi)", "en": "Device (nvidia-smi)"},
    "phase": {"ru": "Фаза пика", "uz": "Cho‘qqi bosqichi", "en": "Peak phase"},
    "forward": {"ru": "прямой проход", "uz": "to‘g‘ri o‘tish", "en": "forward"},
    "backward": {"ru": "обратный проход", "uz": "teskari o‘tish", "en": "backward"},
    "optimizer": {"ru": "шаг оптимизатора", "uz": "optimizator qadami", "en": "optimizer step"},
    "load": {"ru": "загрузка модели", "uz": "modelni yuklash", "en": "model load"},
    "eval": {"ru": "оценка (без градиентов)", "uz": "baholash (gradientlarsiz)", "en": "evaluation"},
    "base_config": {"ru": "Остальные настройки таблицы (прочие — по умолчанию)",
                    "uz": "Jadvalning qolgan sozlamalari (boshqalari — standart)",
                    "en": "The table's other settings (the rest at their defaults)"},
    "component": {"ru": "Компонент", "uz": "Komponent", "en": "Component"},
    "gib_unit": {"ru": "ГиБ", "uz": "GiB", "en": "GiB"},
    "gbps_unit": {"ru": "ГБ/с", "uz": "GB/s", "en": "GB/s"},
    "gib": {"ru": "ГиБ", "uz": "GiB", "en": "GiB"},
    "fits": {"ru": "Помещается", "uz": "Sig‘adi", "en": "Fits"},
    "yes": {"ru": "да", "uz": "ha", "en": "yes"},
    "no": {"ru": "нет", "uz": "yo‘q", "en": "no"},
    "partial": {"ru": "частично", "uz": "qisman", "en": "partial"},
    "tokens_per_second": {"ru": "Токенов/с", "uz": "Token/s", "en": "Tokens/s"},
    "spec": {"ru": "Характеристика", "uz": "Xususiyat", "en": "Specification"},
    "value": {"ru": "Значение", "uz": "Qiymat", "en": "Value"},
    "reported_name": {"ru": "Имя в драйвере", "uz": "Drayverdagi nomi", "en": "Name reported by the driver"},
    "architecture": {"ru": "Архитектура", "uz": "Arxitektura", "en": "Architecture"},
    "memory_smi": {"ru": "Память по nvidia-smi", "uz": "nvidia-smi bo‘yicha xotira", "en": "Memory (nvidia-smi)"},
    "memory_cuda": {"ru": "Память, доступная CUDA", "uz": "CUDA uchun mavjud xotira", "en": "Memory available to CUDA"},
    "bandwidth": {"ru": "Пропускная способность памяти", "uz": "Xotira o‘tkazuvchanligi", "en": "Memory bandwidth"},
    "bf16_tflops": {"ru": "BF16, плотные TFLOPS", "uz": "BF16, zich TFLOPS", "en": "BF16 dense TFLOPS"},
    "interconnect": {"ru": "Связь между GPU", "uz": "GPUlar orasidagi aloqa", "en": "Interconnect"},
    "bf16": {"ru": "Поддержка bf16", "uz": "bf16 qo‘llab-quvvatlanishi", "en": "bf16 support"},
    "flash_attention_2": {"ru": "FlashAttention-2", "uz": "FlashAttention-2", "en": "FlashAttention-2"},
    "bitsandbytes": {"ru": "bitsandbytes", "uz": "bitsandbytes", "en": "bitsandbytes"},
    "spec_sources": {"ru": "Источники характеристик", "uz": "Xususiyatlar manbalari", "en": "Sources of the specs"},
    "model": {"ru": "Модель", "uz": "Model", "en": "Model"},
    "method": {"ru": "Метод", "uz": "Usul", "en": "Method"},
    "context": {"ru": "Контекст", "uz": "Kontekst", "en": "Context"},
    "gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    # Two amounts, two names: what CUDA reports (memory_cuda, torch's total_memory) and what a run may reserve
    # once the process's CUDA context is up (capacity: sizing.estimate.usable_bytes, the fit criterion).
    "capacity": {"ru": "Доступно после контекста CUDA", "uz": "CUDA kontekstidan keyin mavjud",
                 "en": "Usable after the CUDA context"},
    "reserved_gib": {"ru": "Зарезервировано, ГиБ", "uz": "Zaxiralangan, GiB", "en": "Reserved, GiB"},
    "fit_legend": {
        "ru": "✓ — помещается: запас в ГиБ и наибольший микробатч; ✗ — не помещается: нехватка в ГиБ. "
              "LoRA bf16 и QLoRA NF4, r = 16, all-linear, пересчёт активаций (gradient checkpointing), упакованные "
              "последовательности.",
        "uz": "✓ — sig‘adi: GiB dagi zaxira va eng katta mikrobatch; ✗ — sig‘maydi: GiB dagi yetishmovchilik. "
              "LoRA bf16 va QLoRA NF4, r = 16, all-linear, aktivatsiyalarni qayta hisoblash (gradient checkpointing), "
              "zichlangan ketma-ketliklar.",
        "en": "✓ fits: headroom in GiB and the largest micro-batch; ✗ does not fit: the shortfall in GiB. "
              "LoRA in bf16 and QLoRA in NF4, r = 16, all-linear, gradient checkpointing, packed sequences.",
    },
    "compare_legend": {
        "ru": "✓ ×N · T — помещается, наибольший микробатч N, оценка T токенов/с; ✗ — нехватка в ГиБ.",
        "uz": "✓ ×N · T — sig‘adi, eng katta mikrobatch N, taxminan T token/s; ✗ — GiB dagi yetishmovchilik.",
        "en": "✓ ×N · T fits, largest micro-batch N, an estimated T tokens/s; ✗ the shortfall in GiB.",
    },
    "all": {"ru": "Все", "uz": "Hammasi", "en": "All"},
    "source": {"ru": "Источник", "uz": "Manba", "en": "Source"},
    "metric": {"ru": "Метрика", "uz": "Metrika", "en": "Metric"},
    "median_err": {"ru": "Медиана ошибки, %", "uz": "Xato medianasi, %", "en": "Median error, %"},
    "p90_err": {"ru": "90-й перцентиль, %", "uz": "90-persentil, %", "en": "90th percentile, %"},
    "worst_err": {"ru": "Худшая, %", "uz": "Eng yomoni, %", "en": "Worst, %"},
    "by_source": {"ru": "Один GPU, по источникам", "uz": "Bitta GPU, manbalar bo‘yicha",
                  "en": "One GPU, by source"},
    "by_method": {"ru": "Один GPU, по методам", "uz": "Bitta GPU, usullar bo‘yicha", "en": "One GPU, by method"},
    "by_metric": {"ru": "Один GPU, по метрикам", "uz": "Bitta GPU, metrikalar bo‘yicha",
                  "en": "One GPU, by metric"},
    "multi_gpu": {"ru": "Несколько GPU (на один GPU)", "uz": "Bir nechta GPU (bitta GPU uchun)",
                  "en": "Several GPUs (per GPU)"},
    "accuracy_chart": {"ru": "Оценка против измерений", "uz": "Baho va o‘lchovlar", "en": "Estimated vs measured"},
    "measured_gib": {"ru": "Измерено, ГиБ", "uz": "O‘lchangan, GiB", "en": "Measured, GiB"},
    "estimated_gib": {"ru": "Оценка, ГиБ", "uz": "Baho, GiB", "en": "Estimated, GiB"},
}


def label(key: str, lang: str) -> str:
    return LABELS.get(key, {}).get(lang, key)


# A GPU record's `interconnect` (sizing/data/gpus.json) is English; on ru / uz pages its words are these, longest
# phrase first, and its units are the page's (the product names, PCIe generations and figures stay as they are).
_LINK_WORDS: tuple[tuple[str, dict[str, str]], ...] = (
    ("no peer-to-peer between cards", {"ru": "без прямого обмена (P2P) между картами",
                                       "uz": "kartalar orasida to‘g‘ridan-to‘g‘ri almashuv (P2P) yo‘q"}),
    ("no GPU-GPU NVLink figure given", {"ru": "данных об NVLink между GPU нет",
                                        "uz": "GPUlar orasidagi NVLink ko‘rsatkichi berilmagan"}),
    ("NVLink bridge between card pairs", {"ru": "мост NVLink между парами карт",
                                          "uz": "karta juftlari orasida NVLink ko‘prigi"}),
    ("NVLink bridge (3rd gen, bandwidth not sourced)", {
        "ru": "мост NVLink (3-е поколение, пропускная способность без источника)",
        "uz": "NVLink ko‘prigi (3-avlod, o‘tkazuvchanlik manbasiz)"}),
    ("NVLink bridge (up to 4-way)", {"ru": "мост NVLink (до 4 карт)", "uz": "NVLink ko‘prigi (4 tagacha karta)"}),
    ("2-way NVLink bridge", {"ru": "мост NVLink на 2 карты", "uz": "2 karta uchun NVLink ko‘prigi"}),
    ("NVLink bridge", {"ru": "мост NVLink", "uz": "NVLink ko‘prigi"}),
    ("no NVLink", {"ru": "без NVLink", "uz": "NVLink yo‘q"}),
    ("8 per node common", {"ru": "обычно 8 на узел", "uz": "odatda tugunda 8 ta"}),
    ("8 per node observed", {"ru": "встречается по 8 на узел", "uz": "tugunda 8 tadan uchraydi"}),
    ("PCIe variant", {"ru": "вариант PCIe", "uz": "PCIe varianti"}),
    ("AWS G5 instances", {"ru": "инстансы AWS G5", "uz": "AWS G5 instanslari"}),
    ("to the Grace CPU", {"ru": "к CPU Grace", "uz": "Grace CPU bilan"}),
    ("bidirectional", {"ru": "в обе стороны", "uz": "ikki tomonga"}),
    (" links)", {"ru": " линий)", "uz": " ta liniya)"}),
    ("TB/s", {"ru": "ТБ/с", "uz": "TB/s"}),
    ("GB/s", {"ru": "ГБ/с", "uz": "GB/s"}),
    (" GB ", {"ru": " ГБ ", "uz": " GB "}),
)


def interconnect(text: str, lang: str) -> str:
    """A GPU record's interconnect in the page's language: its words, units, and the decimal comma of a rate."""
    for english, words in _LINK_WORDS:
        text = text.replace(english, words.get(lang, english))
    if lang in ("ru", "uz"):  # 112.5 GB/s -> 112,5 (a PCIe generation such as 4.0 keeps its point)
        text = re.sub(r"(\d)\.(\d+)(?= [GTГТ][BБ])", r"\1,\2", text)
    return text


def fmt_bytes(value: int, lang: str) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            number = value / size
            return fmt_num(number, lang, 0 if number == int(number) else 1) + " " + unit
    return fmt_int(value, lang) + " B"


__all__ = ["LABELS", "fmt_bytes", "fmt_gib", "fmt_int", "fmt_num", "interconnect", "label"]
