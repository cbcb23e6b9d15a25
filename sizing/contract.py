# The run configuration as data: one table of fields from which the parser, CLI, form and JSON Schema derive.
# Standard library only and no import from the rest of `sizing` but choices.py, errors.py and jsontext.py: the trial
# recipe embeds exactly config.py + contract.py + choices.py + jsontext.py + errors.py to normalise configurations as
# the estimator does.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The choice values and refused combinations live in choices.py; they stay importable from here.
from .choices import ATTENTION as ATTENTION
from .choices import CONFLICTS as CONFLICTS
from .choices import DTYPE_ALIASES as DTYPE_ALIASES
from .choices import DTYPES as DTYPES
from .choices import EVAL_STRATEGIES as EVAL_STRATEGIES
from .choices import FRAMEWORKS as FRAMEWORKS
from .choices import GLORA_AB as GLORA_AB
from .choices import GLORA_C as GLORA_C
from .choices import GLORA_DE as GLORA_DE
from .choices import LOSSES as LOSSES
from .choices import METHODS as METHODS
from .choices import MISS_INITS as MISS_INITS
from .choices import OPTIMIZERS as OPTIMIZERS
from .choices import PARALLELISM as PARALLELISM
from .choices import PEFT_TYPES as PEFT_TYPES
from .choices import PREDICTIONS as PREDICTIONS
from .choices import ROAD_VARIANTS as ROAD_VARIANTS
from .choices import Conflict as Conflict
from .errors import SizingError
from .jsontext import read_json as read_json  # re-exported: the strict JSON reader lives in jsontext.py

TYPES = ("str", "int", "float", "bool", "targets", "object")  # value types of a field
FORM_KINDS = ("int", "float", "bool", "tristate", "choice", "text", "json")
LANGS = ("ru", "uz", "en")


@dataclass(frozen=True)
class Field:
    """One configuration field: its type, what it accepts, its default, and where it appears."""

    name: str
    type: str  # one of TYPES
    default: Any  # the value when the field is missing or null (None: see `rule` / `nullable`)
    doc: tuple[str, str, str]  # one line each in ru, uz, en
    low: float | None = None  # inclusive bounds of int / float fields
    high: float | None = None
    choices: tuple[str, ...] = ()  # a str field with choices accepts only these (after `aliases`)
    aliases: bool = False  # accepts DTYPE_ALIASES spellings
    rule: str | None = None  # the named rule (config.RULES) that derives a missing value from other fields
    nullable: bool = False  # None survives normalisation and means what `doc` says (a per-model default)
    flag: bool = False  # has its own CLI option --name-with-dashes (every field also takes --set)
    form: str | None = None  # calculator form kind (FORM_KINDS); None: not on the form
    group: str | None = None  # calculator form group (a key into the page words)
    pattern: str | None = None  # a str field's text (stripped) must match this whole (re.fullmatch; JSON Schema)

    def accepts(self) -> tuple[str, ...]:
        """Every string a choice field takes: its choices and, for dtypes, their aliases."""
        extra = tuple(a for a, canon in DTYPE_ALIASES.items() if canon in self.choices) if self.aliases else ()
        return self.choices + extra


# A release as packages write it: a number first, then dotted numbers and suffixes (0.1, 0.19.2.dev0, 2.13.0+cu130);
# text without one would be read as release 0, older than every real one (frameworks._release)
RELEASE = r"v?[0-9]+(\.[0-9]+)*[0-9A-Za-z.+-]*"
_M, _P, _L, _B, _G, _T = ("group_model", "group_precision", "group_lora", "group_batch", "group_gpu", "group_time")
_ANY_DTYPE = (*DTYPES, "auto")

# Bounds are sanity limits that catch typos and overflow, not physics (the engine refuses what cannot run, e.g. a
# rank above the layer width): 10**15 dataset tokens is ~67x Llama 3's 15T-token pretraining set (Meta, 2024).
# Order = RunConfig's field order = config_to_dict's key order = the calculator form's order.
FIELDS: tuple[Field, ...] = (
    Field("model", "str", None, ("Идентификатор модели из каталога; null, если задан model_config",
                                 "Katalogdagi model identifikatori; model_config berilsa null",
                                 "Catalog model id; null when model_config is given"),
          nullable=True, flag=True, form="choice", group=_M),
    Field("model_config", "object", None, (
           "Содержимое config.json Hugging Face (плотный или MoE-декодер); важнее model",
           "Hugging Face config.json mazmuni (zich yoki MoE dekoder); model maydonidan ustun",
           "A Hugging Face config.json (dense or MoE decoder); wins over model"),
          nullable=True, form="json", group=_M),
    Field("framework", "str", "transformers", ("Чей цикл обучения и умолчания", "Qaysi o‘qitish sikli va standartlar",
                                               "Whose training loop and defaults"),
          choices=FRAMEWORKS, flag=True, form="choice", group=_M),
    Field("framework_version", "str", None, ("Версия фреймворка (например 0.1 у torchtune); null — текущая",
                                             "Freymvork versiyasi (masalan, torchtune uchun 0.1); null — joriy versiya",
                                             "Framework release (e.g. 0.1 for torchtune); null: the current one"),
          nullable=True, pattern=RELEASE),
    Field("peft_version", "str", None, ("Версия PEFT (например 0.21.0); null — текущая. Меняет то, что хранят "
                                        "некоторые методы (AdaLoRA до 0.21.1)",
                                        "PEFT versiyasi (masalan, 0.21.0); null — joriy versiya. Ba’zi usullar "
                                        "saqlaydigan narsani o‘zgartiradi (0.21.1 dan oldingi AdaLoRA)",
                                        "PEFT release (e.g. 0.21.0); null: the current one. It changes what some "
                                        "methods keep (AdaLoRA before 0.21.1)"),
          nullable=True, pattern=RELEASE),
    Field("method", "str", "lora", ("full, lora, qlora (LoRA на 4-битной базе) или lora8 (LoRA на 8-битной базе)",
                                    "full, lora, qlora (4-bitli asosda LoRA) yoki lora8 (8-bitli asosda LoRA)",
                                    "full, lora, qlora (LoRA on a 4-bit base) or lora8 (LoRA on an 8-bit base)"),
          choices=METHODS, flag=True, form="choice", group=_P),
    # "auto" is "dtype not given", not from_pretrained(dtype="auto"): TRL's create_model_from_path loads float32
    # when no dtype is given but the checkpoint's dtype for an explicit "auto" (trl v1.9.0 trainer/utils.py), so
    # config.py normalises trl's "auto" to float32; transformers' stays "auto" (it depends on the checkpoint).
    Field("torch_dtype", "str", "auto", ("Тип весов при загрузке; auto — dtype не задан: как в checkpoint (с trl "
                                         "— float32)",
                                         "Yuklashdagi vazn turi; auto — dtype berilmagan: checkpoint bo‘yicha (trl "
                                         "bilan float32)",
                                         "Load dtype of the weights; auto: no dtype given, the checkpoint's (with "
                                         "trl: float32)"),
          choices=_ANY_DTYPE, aliases=True, flag=True, form="choice", group=_P),
    Field("bf16", "bool", None, ("Смешанная точность bf16; null — умолчание фреймворка (с trl включена)",
                                 "bf16 aralash aniqlik; null — freymvork standarti (trl bilan yoqilgan)",
                                 "bf16 mixed precision; null: the framework's default (on with trl)"),
          rule="framework_bf16", form="tristate", group=_P),
    Field("fp16", "bool", False, ("Смешанная точность fp16", "fp16 aralash aniqlik", "fp16 mixed precision"),
          form="bool", group=_P),
    Field("load_in_4bit", "bool", None, ("4-битная база bitsandbytes; null — по методу (qlora)",
                                         "bitsandbytes 4-bitli asos; null — usulga qarab (qlora)",
                                         "bitsandbytes 4-bit base; null: follows method (qlora)"),
          rule="method_4bit"),
    Field("bnb_4bit_quant_type", "str", "fp4", ("4-битный формат (в BitsAndBytesConfig по умолчанию fp4)",
                                                "4-bit format (BitsAndBytesConfig standarti fp4)",
                                                "4-bit format (BitsAndBytesConfig default: fp4)"),
          choices=("nf4", "fp4"), form="choice", group=_P),
    Field("bnb_4bit_use_double_quant", "bool", False, ("Повторно квантовать масштабы 4-битных блоков",
                                                       "4-bit bloklar masshtablarini yana kvantlash",
                                                       "Quantize the 4-bit block scales again"),
          form="bool", group=_P),
    Field("bnb_4bit_compute_dtype", "str", "float32", ("Тип вычислений 4-битных слоёв (по умолчанию float32)",
                                                       "4-bit qatlamlar hisoblash turi (standart float32)",
                                                       "Compute dtype of 4-bit layers (default float32)"),
          choices=DTYPES, aliases=True, form="choice", group=_P),
    Field("bnb_4bit_quant_storage", "str", "uint8", ("Тип хранения упакованных 4-битных весов",
                                                     "Zichlangan 4-bit vaznlar saqlanadigan tur",
                                                     "Storage dtype of the packed 4-bit weights"),
          choices=("uint8", *DTYPES), aliases=True),
    Field("load_in_8bit", "bool", None, ("База LLM.int8; null — по методу (lora8)",
                                         "LLM.int8 asos; null — usulga qarab (lora8)",
                                         "LLM.int8 base; null: follows method (lora8)"),
          rule="method_8bit"),
    Field("prepare_model_for_kbit_training", "bool", None,
          ("prepare_model_for_kbit_training из PEFT на k-битной базе; null — да с transformers/custom, нет с trl",
           "k-bitli asosda PEFT prepare_model_for_kbit_training; null — transformers/custom bilan ha, trl bilan yo‘q",
           "PEFT's prepare_model_for_kbit_training on a k-bit base; null: yes with transformers/custom, no with trl"),
          rule="kbit_prepare"),
    Field("quantization_backend", "str", "bitsandbytes", ("Кто квантует базу: bitsandbytes или torchao",
                                                          "Asosni kim kvantlaydi: bitsandbytes yoki torchao",
                                                          "Who quantizes the base: bitsandbytes or torchao"),
          choices=("bitsandbytes", "torchao")),
    Field("r", "int", 8, ("Ранг LoRA (LoraConfig.r)", "LoRA rangi (LoraConfig.r)", "LoRA rank (LoraConfig.r)"),
          low=1, high=65536, flag=True, form="int", group=_L),
    Field("lora_alpha", "float", 8.0, ("Числитель масштаба LoRA (LoraConfig.lora_alpha)",
                                       "LoRA masshtabi surati (LoraConfig.lora_alpha)",
                                       "Numerator of the LoRA scale (LoraConfig.lora_alpha)"),
          low=0.0, high=1e6, form="float", group=_L),
    Field("lora_dropout", "float", 0.0, ("Dropout перед матрицей A LoRA", "LoRA A matritsasidan oldingi dropout",
                                         "Dropout before the LoRA A matrix"),
          low=0.0, high=0.99, form="float", group=_L),
    Field("target_modules", "targets", None,
          ("all-linear или имена модулей; null — умолчание PEFT для модели и метода (LoRA у Llama: q_proj, v_proj; "
           "IA3: k_proj, v_proj, down_proj)",
           "all-linear yoki modul nomlari; null — model va usul uchun PEFT standarti (Llama’da LoRA: q_proj, v_proj; "
           "IA3: k_proj, v_proj, down_proj)",
           "all-linear or module names; null: PEFT's default for the model and method (LoRA on Llama: q_proj, v_proj; "
           "IA3: k_proj, v_proj, down_proj)"),
          nullable=True, form="text", group=_L),
    Field("use_dora", "bool", False, ("DoRA поверх метода LoRA", "LoRA usuli ustiga DoRA", "DoRA on a LoRA method"),
          form="bool", group=_L),
    Field("peft_type", "str", "lora", ("Метод PEFT: lora, lora_fa, adalora (r = init_r), ia3, vera, loha, lokr, oft, "
                                       "boft, prompt_tuning, prefix_tuning, ln_tuning, miss (miss_init, mini_r), "
                                       "gralora (gralora_k блоков, hybrid_r = 0), shira, hra, delora, hira, "
                                       "fourierft (n_frequency), randlora, pvera, c3a (block_size), beft, "
                                       "road (road_variant, group_size), waveft (n_frequency), "
                                       "p_tuning (MLP, encoder_hidden_size), vblora (num_vectors, vector_length, "
                                       "topk), unilora (theta_d_length), deft (deft_para), lily (stride_A, num_B), "
                                       "peanut (depth), tinylora (tinylora_u, weight_tying), glora (config_A_B, "
                                       "config_C, config_D_E), psoft (psoft_orth, psoft_mag_a, psoft_mag_b), "
                                       "trainable_tokens (num_trainable_tokens), adamss (num_subspaces, "
                                       "subspace_rank), adaption_prompt (adapter_len, adapter_layers), frod "
                                       "(sparse_rate, runtime_offload_base_weight), osf (effective_rank, "
                                       "osf_trainable_rank)",
                                       "PEFT usuli: lora, lora_fa, adalora (r = init_r), ia3, vera, loha, lokr, oft, "
                                       "boft, prompt_tuning, prefix_tuning, ln_tuning, miss (miss_init, mini_r), "
                                       "gralora (gralora_k ta blok, hybrid_r = 0), shira, hra, delora, hira, "
                                       "fourierft (n_frequency), randlora, pvera, c3a (block_size), beft, "
                                       "road (road_variant, group_size), waveft (n_frequency), "
                                       "p_tuning (MLP, encoder_hidden_size), vblora (num_vectors, vector_length, "
                                       "topk), unilora (theta_d_length), deft (deft_para), lily (stride_A, num_B), "
                                       "peanut (depth), tinylora (tinylora_u, weight_tying), glora (config_A_B, "
                                       "config_C, config_D_E), psoft (psoft_orth, psoft_mag_a, psoft_mag_b), "
                                       "trainable_tokens (num_trainable_tokens), adamss (num_subspaces, "
                                       "subspace_rank), adaption_prompt (adapter_len, adapter_layers), frod "
                                       "(sparse_rate, runtime_offload_base_weight), osf (effective_rank, "
                                       "osf_trainable_rank)",
                                       "PEFT method: lora, lora_fa, adalora (r = init_r), ia3, vera, loha, lokr, oft, "
                                       "boft, prompt_tuning, prefix_tuning, ln_tuning, miss (miss_init, mini_r), "
                                       "gralora (gralora_k blocks, hybrid_r = 0), shira, hra, delora, hira, "
                                       "fourierft (n_frequency), randlora, pvera, c3a (block_size), beft, "
                                       "road (road_variant, group_size), waveft (n_frequency), "
                                       "p_tuning (MLP, encoder_hidden_size), vblora (num_vectors, vector_length, "
                                       "topk), unilora (theta_d_length), deft (deft_para), lily (stride_A, num_B), "
                                       "peanut (depth), tinylora (tinylora_u, weight_tying), glora (config_A_B, "
                                       "config_C, config_D_E), psoft (psoft_orth, psoft_mag_a, psoft_mag_b), "
                                       "trainable_tokens (num_trainable_tokens), adamss (num_subspaces, "
                                       "subspace_rank), adaption_prompt (adapter_len, adapter_layers), frod "
                                       "(sparse_rate, runtime_offload_base_weight), osf (effective_rank, "
                                       "osf_trainable_rank)"),
          choices=PEFT_TYPES, form="choice", group=_L),
    # PEFT's PromptLearningConfig has no default (None); 20 is the value of PEFT's prompt-tuning examples.
    Field("num_virtual_tokens", "int", 20, ("Виртуальных токенов у prompt_tuning / prefix_tuning / p_tuning",
                                            "prompt_tuning / prefix_tuning / p_tuning virtual tokenlari soni",
                                            "Virtual tokens of prompt_tuning / prefix_tuning / p_tuning"),
          low=1, high=100_000),
    Field("decompose_factor", "int", -1, ("LoKrConfig.decompose_factor; -1 — множители около корня",
                                          "LoKrConfig.decompose_factor; -1 — ildizga yaqin ko‘paytuvchilar",
                                          "LoKrConfig.decompose_factor; -1: factors near the square root"),
          low=-1, high=65536),
    Field("gralora_k", "int", 2, ("GraloraConfig.gralora_k: на сколько блоков делятся вход и выход слоя",
                                  "GraloraConfig.gralora_k: qatlam kirishi va chiqishi nechta blokka bo‘linadi",
                                  "GraloraConfig.gralora_k: blocks the layer's input and output are split into"),
          low=1, high=65536),
    Field("n_frequency", "int", None, ("n_frequency у FourierFT / WaveFT: обучаемых коэффициентов в каждом слое; "
                                       "null — умолчание PEFT (1000 / 2592)",
                                       "FourierFT / WaveFT n_frequency: har bir qatlamdagi o‘qitiladigan "
                                       "koeffitsiyentlar; null — PEFT standarti (1000 / 2592)",
                                       "FourierFT / WaveFT n_frequency: trainable coefficients per layer; null: "
                                       "PEFT's default (1000 / 2592)"),
          low=1, high=1 << 31, rule="peft_n_frequency"),
    Field("block_size", "int", 256, ("C3AConfig.block_size: размер циркулянтного блока; делит вход и выход слоя",
                                     "C3AConfig.block_size: sirkulyant blok o‘lchami; qatlam kirishi va chiqishini "
                                     "bo‘ladi",
                                     "C3AConfig.block_size: the circulant block size; divides the layer's input and "
                                     "output"),
          low=1, high=65536),
    Field("miss_init", "str", "default", ("MissConfig.init_weights: default (True), bat (блоки r × r, полный вес на "
                                          "каждом шаге) или mini (блок r × mini_r)",
                                          "MissConfig.init_weights: default (True), bat (r × r bloklar, har qadamda "
                                          "to‘liq vazn) yoki mini (r × mini_r blok)",
                                          "MissConfig.init_weights: default (True), bat (r x r blocks, a whole weight "
                                          "each step) or mini (an r x mini_r block)"),
          choices=MISS_INITS),
    Field("mini_r", "int", 1, ("MissConfig.mini_r: ширина блока MiSS mini (делит выход слоя)",
                               "MissConfig.mini_r: MiSS mini bloki kengligi (qatlam chiqishini bo‘lishi kerak)",
                               "MissConfig.mini_r: the MiSS mini block's width (it divides the layer's output)"),
          low=1, high=1 << 20),
    Field("road_variant", "str", "road_1", ("RoadConfig.variant: road_1, road_2 или road_4 (1, 2 или 4 × выход слоя "
                                            "параметров)",
                                            "RoadConfig.variant: road_1, road_2 yoki road_4 (qatlam chiqishining 1, 2 "
                                            "yoki 4 barobari parametr)",
                                            "RoadConfig.variant: road_1, road_2 or road_4 (1, 2 or 4 x the layer's "
                                            "output parameters)"),
          choices=ROAD_VARIANTS),
    Field("group_size", "int", 64, ("RoadConfig.group_size: чётное, делит выход каждого слоя",
                                    "RoadConfig.group_size: juft, har bir qatlam chiqishini bo‘ladi",
                                    "RoadConfig.group_size: even, divides every layer's output"),
          low=2, high=65536),
    Field("num_vectors", "int", 256, ("VBLoRAConfig.num_vectors: векторов в общем банке",
                                      "VBLoRAConfig.num_vectors: umumiy bankdagi vektorlar soni",
                                      "VBLoRAConfig.num_vectors: vectors in the shared bank"),
          low=1, high=1 << 20),
    Field("vector_length", "int", 256, ("VBLoRAConfig.vector_length: длина вектора банка; делит вход и выход слоя",
                                        "VBLoRAConfig.vector_length: bank vektori uzunligi; qatlam kirishi va "
                                        "chiqishini bo‘ladi",
                                        "VBLoRAConfig.vector_length: a bank vector's length; divides the layer's "
                                        "input and output"),
          low=1, high=1 << 20),
    Field("topk", "int", 2, ("VBLoRAConfig.topk: векторов банка в каждом подвекторе; не больше num_vectors",
                             "VBLoRAConfig.topk: har bir qism vektordagi bank vektorlari; num_vectors dan oshmaydi",
                             "VBLoRAConfig.topk: bank vectors mixed per sub-vector; at most num_vectors"),
          low=1, high=1 << 20),
    Field("theta_d_length", "int", 256, ("UniLoraConfig.theta_d_length: длина единственного обучаемого вектора",
                                         "UniLoraConfig.theta_d_length: yagona o‘qitiladigan vektor uzunligi",
                                         "UniLoraConfig.theta_d_length: the one trainable vector's length"),
          low=1, high=1 << 31),
    Field("deft_para", "bool", False, ("DeftConfig.para: только удаление подпространства (PaRa), без R",
                                       "DeftConfig.para: faqat qism fazoni olib tashlash (PaRa), R siz",
                                       "DeftConfig.para: subspace removal only (PaRa), no R")),
    Field("stride_A", "int", 1, ("LilyConfig.stride_A: соседних слоёв с общей A",
                                 "LilyConfig.stride_A: umumiy A ga ega qo‘shni qatlamlar",
                                 "LilyConfig.stride_A: consecutive layers sharing one A"),
          low=1, high=65536),
    Field("num_B", "int", 2, ("LilyConfig.num_B: общих для всех слоёв матриц B (не меньше 2)",
                              "LilyConfig.num_B: barcha qatlamlar uchun umumiy B matritsalari (kamida 2)",
                              "LilyConfig.num_B: B matrices shared by every layer (at least 2)"),
          low=2, high=65536),
    Field("depth", "int", 0, ("PeanutConfig.depth: скрытых слоёв кодировщика и декодировщика",
                              "PeanutConfig.depth: kodlovchi va dekodlovchining yashirin qatlamlari",
                              "PeanutConfig.depth: hidden encoder and decoder layers"),
          low=0, high=1024),
    Field("tinylora_u", "int", 64, ("TinyLoraConfig.u: длина обучаемого вектора каждой группы слоёв",
                                    "TinyLoraConfig.u: har bir qatlamlar guruhining o‘qitiladigan vektori uzunligi",
                                    "TinyLoraConfig.u: the trainable vector's length per group of layers"),
          low=1, high=1 << 20),
    Field("weight_tying", "float", 0.0, ("TinyLoraConfig.weight_tying: доля слоёв с общим вектором, от 0 до 1",
                                         "TinyLoraConfig.weight_tying: umumiy vektorli qatlamlar ulushi, 0 dan 1 gacha",
                                         "TinyLoraConfig.weight_tying: the share of layers tied to one vector, 0 to 1"),
          low=0.0, high=1.0),
    Field("config_A_B", "str", "lora", ("GloraConfig.config_A_B: пути A и B — lora (ранг r), vector, constant, none",
                                        "GloraConfig.config_A_B: A va B yo‘llari — lora (r rang), vector, constant, "
                                        "none",
                                        "GloraConfig.config_A_B: the A and B paths, lora (rank r), vector, constant, "
                                        "none"),
          choices=GLORA_AB),
    Field("config_C", "str", "lora", ("GloraConfig.config_C: путь C (только у слоёв со смещением)",
                                      "GloraConfig.config_C: C yo‘li (faqat siljishli qatlamlarda)",
                                      "GloraConfig.config_C: the C path (layers with a bias only)"),
          choices=GLORA_C),
    Field("config_D_E", "str", "constant", ("GloraConfig.config_D_E: пути D и E (только у слоёв со смещением)",
                                            "GloraConfig.config_D_E: D va E yo‘llari (faqat siljishli qatlamlarda)",
                                            "GloraConfig.config_D_E: the D and E paths (layers with a bias only)"),
          choices=GLORA_DE),
    Field("psoft_orth", "bool", True, ("PsoftConfig.psoft_orth: R ортогональна (r(r-1)/2 параметров), иначе r x r",
                                       "PsoftConfig.psoft_orth: R ortogonal (r(r-1)/2 parametr), aks holda r x r",
                                       "PsoftConfig.psoft_orth: R orthogonal (r(r-1)/2 parameters), else r x r")),
    Field("psoft_mag_a", "bool", True, ("PsoftConfig.psoft_mag_a: обучаемый вектор масштаба r со стороны A",
                                        "PsoftConfig.psoft_mag_a: A tomonidagi o‘qitiladigan r masshtab vektori",
                                        "PsoftConfig.psoft_mag_a: a trained r-wide scale on A's side")),
    Field("psoft_mag_b", "bool", True, ("PsoftConfig.psoft_mag_b: обучаемый вектор масштаба r со стороны B",
                                        "PsoftConfig.psoft_mag_b: B tomonidagi o‘qitiladigan r masshtab vektori",
                                        "PsoftConfig.psoft_mag_b: a trained r-wide scale on B's side")),
    Field("num_subspaces", "int", 5, ("AdamssConfig.num_subspaces: групп строк выхода (кластеров KMeans) на слой",
                                      "AdamssConfig.num_subspaces: qatlamdagi chiqish qatorlari guruhlari (KMeans "
                                      "klasterlari)",
                                      "AdamssConfig.num_subspaces: groups of output rows (KMeans clusters) per layer"),
          low=1, high=1 << 20),
    Field("subspace_rank", "int", 1, ("AdamssConfig.subspace_rank: ранг каждой группы (0 PEFT считает как 1)",
                                      "AdamssConfig.subspace_rank: har bir guruh rangi (0 ni PEFT 1 deb oladi)",
                                      "AdamssConfig.subspace_rank: the rank of each group (PEFT takes 0 as 1)"),
          low=0, high=1 << 20),
    Field("adapter_len", "int", 10, ("AdaptionPromptConfig.adapter_len: токенов подсказки в каждом адаптированном "
                                     "слое внимания",
                                     "AdaptionPromptConfig.adapter_len: har bir moslashtirilgan diqqat qatlamidagi "
                                     "prompt tokenlari",
                                     "AdaptionPromptConfig.adapter_len: prompt tokens in each adapted attention layer"),
          low=1, high=1 << 20),
    Field("adapter_layers", "int", None, ("AdaptionPromptConfig.adapter_layers: сколько последних слоёв внимания "
                                          "адаптировать; null — все",
                                          "AdaptionPromptConfig.adapter_layers: oxirgi nechta diqqat qatlami "
                                          "moslashtiriladi; null — hammasi",
                                          "AdaptionPromptConfig.adapter_layers: how many of the last attention layers "
                                          "to adapt; null: all"),
          low=1, high=1 << 20, nullable=True),
    Field("sparse_rate", "float", 0.01, ("FrodConfig.sparse_rate: доля обучаемых внедиагональных элементов "
                                         "матрицы S (in × in)",
                                         "FrodConfig.sparse_rate: S matritsasining (in × in) o‘qitiladigan diagonaldan "
                                         "tashqari elementlari ulushi",
                                         "FrodConfig.sparse_rate: the share of S's off-diagonal entries (in × in) "
                                         "that train"),
          low=0.0, high=1.0),
    Field("runtime_offload_base_weight", "bool", False,
          ("FrodConfig.runtime_offload_base_weight: перенести вес адаптированного слоя в память CPU (его заменяет U)",
           "FrodConfig.runtime_offload_base_weight: moslashtirilgan qatlam vaznini CPU xotirasiga ko‘chirish (uni U "
           "almashtiradi)",
           "FrodConfig.runtime_offload_base_weight: move the adapted layer's weight to CPU memory (U takes its "
           "place)")),
    # OSF's effective_rank: an int, or a fraction in (0, 1) of each layer's smaller side (OSFConfig; PEFT reads a float
    # of 1.0 as the whole side, which trains nothing); None: half of it (tuners/osf/model.py _resolve_rank)
    Field("effective_rank", "float", None, ("OSFConfig.effective_rank: сколько старших сингулярных направлений "
                                            "каждого слоя заморожено (целое или доля < 1 меньшей стороны); null — "
                                            "половина",
                                            "OSFConfig.effective_rank: har bir qatlamning nechta katta singulyar "
                                            "yo‘nalishi muzlatiladi (butun son yoki kichik tomonning < 1 ulushi); "
                                            "null — yarmi",
                                            "OSFConfig.effective_rank: how many top singular directions of each "
                                            "layer stay frozen (an integer, or a fraction < 1 of its smaller side); "
                                            "null: half"),
          low=0.0, high=1 << 20, nullable=True),
    Field("osf_trainable_rank", "int", None, ("OSF: ранг, который обучает каждый слой (меньшая сторона минус "
                                              "effective_rank; так задаёт rank_pattern бенчмарк PEFT); null — из "
                                              "effective_rank",
                                              "OSF: har bir qatlam o‘qitadigan rang (kichik tomon minus "
                                              "effective_rank; PEFT benchmarki rank_pattern bilan shunday beradi); "
                                              "null — effective_rank dan",
                                              "OSF: the rank each layer trains (its smaller side minus "
                                              "effective_rank; PEFT's benchmark sets it with rank_pattern); null: "
                                              "from effective_rank"),
          low=1, high=1 << 20, nullable=True),
    Field("num_trainable_tokens", "int", 2, ("Строк эмбеддинга у trainable_tokens (длина token_indices)",
                                             "trainable_tokens o‘qitadigan embedding qatorlari (token_indices "
                                             "uzunligi)",
                                             "Embedding rows trainable_tokens trains (the length of token_indices)"),
          low=1, high=1 << 24),
    Field("encoder_hidden_size", "int", None, ("PromptEncoderConfig.encoder_hidden_size (MLP); null — ширина модели",
                                               "PromptEncoderConfig.encoder_hidden_size (MLP); null — model kengligi",
                                               "PromptEncoderConfig.encoder_hidden_size (MLP); null: the model's "
                                               "hidden size"),
          low=1, high=1 << 20, nullable=True),
    Field("feedforward_modules", "targets", None,
          ("IA3Config.feedforward_modules: модули, чей вход масштабирует IA3; null — умолчание PEFT для модели",
           "IA3Config.feedforward_modules: IA3 kirishini masshtablaydigan modullar; null — model uchun PEFT standarti",
           "IA3Config.feedforward_modules: modules whose input IA3 scales; null: PEFT's per-model default"),
          nullable=True),
    Field("adapter_dtype", "str", "auto", ("Тип весов адаптера; auto — fp32 у PEFT, bf16 у TRL на k-битной базе",
                                           "Adapter vaznlari turi; auto — PEFT uchun fp32, k-bitli asosda TRL uchun "
                                           "bf16",
                                           "Adapter weight dtype; auto: PEFT's fp32, TRL's bf16 on a k-bit base"),
          choices=_ANY_DTYPE, aliases=True),
    Field("max_seq_length", "int", 1024, ("Токенов в самой длинной последовательности микробатча",
                                          "Mikrobatchdagi eng uzun ketma-ketlik tokenlari",
                                          "Tokens in the longest sequence of a micro-batch"),
          low=1, high=10_000_000, flag=True, form="int", group=_B),
    Field("per_device_train_batch_size", "int", 8, ("Последовательностей в микробатче на каждом GPU",
                                                    "Har bir GPU uchun mikrobatchdagi ketma-ketliklar",
                                                    "Sequences per micro-batch on each GPU"),
          low=1, high=65536, flag=True, form="int", group=_B),
    Field("gradient_accumulation_steps", "int", 1, ("Микробатчей на шаг оптимизатора (время, не пик памяти)",
                                                    "Optimizator qadamiga mikrobatchlar (vaqt, xotira cho‘qqisi emas)",
                                                    "Micro-batches per optimizer step (time, not peak memory)"),
          low=1, high=1_000_000, flag=True, form="int", group=_B),
    Field("eval_strategy", "str", "no", ("Оценка во время обучения (TrainingArguments): no, steps или epoch",
                                         "O‘qitish davomida baholash (TrainingArguments): no, steps yoki epoch",
                                         "Evaluation during training (TrainingArguments): no, steps or epoch"),
          choices=EVAL_STRATEGIES, form="choice", group=_B),
    Field("per_device_eval_batch_size", "int", 8, ("Последовательностей в батче оценки на каждом GPU",
                                                   "Har bir GPU uchun baholash batchidagi ketma-ketliklar",
                                                   "Sequences per evaluation batch on each GPU"),
          low=1, high=65536, form="int", group=_B),
    Field("compute_metrics", "bool", False, ("Trainer получает compute_metrics: оценка держит на GPU предсказания "
                                             "всех батчей (пока их не унесёт eval_accumulation_steps)",
                                             "Trainer compute_metrics oladi: baholash barcha batchlarning "
                                             "bashoratlarini GPU da saqlaydi (eval_accumulation_steps olib "
                                             "ketguncha)",
                                             "The Trainer is given compute_metrics: the evaluation keeps every "
                                             "batch's predictions on the GPU (until eval_accumulation_steps moves "
                                             "them)"),
          form="bool", group=_B),
    Field("preprocess_logits_for_metrics", "str", "none",
          ("Что остаётся от логитов батча для метрик: none — логиты целиком, argmax — id токенов",
           "Metrikalar uchun batch logitlaridan nima qoladi: none — logitlar to‘liq, argmax — token id lari",
           "What is kept of a batch's logits for the metrics: none: the whole logits, argmax: token ids"),
          choices=PREDICTIONS, form="choice", group=_B),
    Field("eval_accumulation_steps", "int", None, ("Через сколько батчей оценки предсказания уходят с GPU в "
                                                   "память CPU (TrainingArguments); null — только в конце",
                                                   "Nechta baholash batchidan keyin bashoratlar GPU dan CPU "
                                                   "xotirasiga o‘tadi (TrainingArguments); null — faqat oxirida",
                                                   "Evaluation batches after which the predictions move from the "
                                                   "GPU to CPU memory (TrainingArguments); null: only at the end"),
          low=1, high=1_000_000, nullable=True, form="int", group=_B),
    Field("eval_samples", "int", None, ("Последовательностей в наборе для оценки (нужно с compute_metrics)",
                                        "Baholash to‘plamidagi ketma-ketliklar (compute_metrics bilan kerak)",
                                        "Sequences in the evaluation set (needed with compute_metrics)"),
          low=1, high=1 << 30, nullable=True, form="int", group=_B),
    Field("batch_eval_metrics", "bool", False, ("compute_metrics вызывается на каждом батче оценки "
                                                "(TrainingArguments): предсказания не копятся на GPU",
                                                "compute_metrics har bir baholash batchida chaqiriladi "
                                                "(TrainingArguments): bashoratlar GPU da to‘planmaydi",
                                                "compute_metrics is called on each evaluation batch "
                                                "(TrainingArguments): no predictions pile up on the GPU"),
          form="bool", group=_B),
    Field("eval_do_concat_batches", "bool", True, ("Предсказания батчей оценки склеиваются в один тензор "
                                                   "(TrainingArguments); false — хранятся списком",
                                                   "Baholash batchlari bashoratlari bitta tenzorga ulanadi "
                                                   "(TrainingArguments); false — ro‘yxat bo‘lib saqlanadi",
                                                   "The evaluation batches' predictions are concatenated into one "
                                                   "tensor (TrainingArguments); false: kept as a list"),
          form="bool", group=_B),
    Field("packing", "bool", False, ("Последовательности упакованы до max_seq_length (без паддинга)",
                                     "Ketma-ketliklar max_seq_length gacha zichlangan (to‘ldirishsiz)",
                                     "Sequences packed to max_seq_length (no padding)"),
          form="bool", group=_B),
    Field("gradient_checkpointing", "bool", None,
          ("Пересчёт активаций в обратном проходе; null — умолчание фреймворка (с trl включён)",
           "Aktivatsiyalarni teskari o‘tishda qayta hisoblash; null — freymvork standarti (trl bilan yoqilgan)",
           "Recompute activations in backward; null: the framework's default (on with trl)"),
          rule="framework_checkpointing", form="tristate", group=_B),
    Field("attn_implementation", "str", "sdpa", ("Реализация внимания", "Attention amalga oshirilishi",
                                                 "Attention implementation"),
          choices=ATTENTION, flag=True, form="choice", group=_B),
    Field("optim", "str", "adamw_torch_fused", ("Оптимизатор (имена TrainingArguments)",
                                                "Optimizator (TrainingArguments nomlari)",
                                                "Optimizer (TrainingArguments names)"),
          choices=OPTIMIZERS, flag=True, form="choice", group=_B),
    Field("loss_implementation", "str", None, ("Реализация функции потерь; null — та, что у фреймворка",
                                               "Yo‘qotish funksiyasi; null — freymvork o‘zi tanlaydi",
                                               "Loss implementation; null: the framework's own"),
          choices=LOSSES, nullable=True),
    Field("torch_compile", "bool", False, ("torch.compile для модели", "Modelga torch.compile",
                                           "torch.compile on the model"), ),
    Field("activation_offloading", "bool", False, ("Сохранённые активации выгружаются в память CPU",
                                                   "Saqlangan aktivatsiyalar CPU xotirasiga ko‘chiriladi",
                                                   "Saved activations offloaded to CPU memory")),
    Field("optimizer_in_backward", "bool", False, ("Шаг оптимизатора внутри обратного прохода",
                                                   "Optimizator qadami teskari o‘tish ichida",
                                                   "Optimizer step fused into the backward pass")),
    Field("gpu", "str", "H100-SXM-80GB", ("Идентификатор GPU из каталога", "Katalogdagi GPU identifikatori",
                                          "GPU catalog id"),
          flag=True, form="choice", group=_G),
    Field("num_gpus", "int", 1, ("Число GPU в запуске; память — на один GPU",
                                 "Ishga tushirishdagi GPU soni; xotira bitta GPU uchun",
                                 "GPUs in the run; memory is per GPU"),
          low=1, high=4096, flag=True, form="int", group=_G),
    Field("parallelism", "str", "none", ("none/ddp/fsdp_no_shard — копии модели, fsdp/zero3 — шардирование всего, "
                                         "zero2/fsdp_shard_grad_op — градиентов и оптимизатора",
                                         "none/ddp/fsdp_no_shard — model nusxalari, fsdp/zero3 — hammasini bo‘lish, "
                                         "zero2/fsdp_shard_grad_op — gradiyent va optimizatorni bo‘lish",
                                         "none/ddp/fsdp_no_shard replicate the model, fsdp/zero3 shard everything, "
                                         "zero2/fsdp_shard_grad_op shard gradients and optimizer"),
          choices=PARALLELISM, flag=True, form="choice", group=_G),
    Field("cpu_offload", "bool", False, ("Выгрузка в память CPU (ZeRO-Offload, FSDP CPU offload)",
                                         "CPU xotirasiga ko‘chirish (ZeRO-Offload, FSDP CPU offload)",
                                         "Offload to CPU memory (ZeRO-Offload, FSDP CPU offload)")),
    # torchtune's full_finetune_distributed: custom_sharded_layers: ['tok_embeddings', 'output'] (llama3 / 3.1 8B
    # and 70B full configs from v0.3.0) fully_shard()s the two as their own FSDP2 units (training.shard_model).
    Field("fsdp_shard_embeddings", "bool", False, (
        "FSDP: входной эмбеддинг и LM head — отдельные юниты (torchtune custom_sharded_layers)",
        "FSDP: kirish embeddingi va LM head — alohida birliklar (torchtune custom_sharded_layers)",
        "FSDP: the input embedding and the LM head are units of their own (torchtune custom_sharded_layers)")),
    Field("dataset_tokens", "int", None, ("Токенов в датасете за эпоху (для времени и стоимости)",
                                          "Bir epoxadagi dataset tokenlari (vaqt va narx uchun)",
                                          "Dataset tokens per epoch (for time and cost)"),
          low=1, high=10**15, nullable=True, form="int", group=_T),
    Field("num_train_epochs", "float", 3.0, ("Эпох (в TrainingArguments по умолчанию 3)",
                                             "Epoxalar (TrainingArguments standarti 3)",
                                             "Epochs (TrainingArguments default 3)"),
          low=0.0, high=1e4, form="float", group=_T),
    Field("eval_steps", "int", None, ("Шагов оптимизатора между оценками при eval_strategy steps "
                                      "(TrainingArguments); null — как logging_steps: 500, у trl 10",
                                      "eval_strategy steps bo‘lganda baholashlar orasidagi optimizator qadamlari "
                                      "(TrainingArguments); null — logging_steps kabi: 500, trl da 10",
                                      "Optimizer steps between evaluations with eval_strategy steps "
                                      "(TrainingArguments); null: as logging_steps, 500 (trl: 10)"),
          low=1, high=10**9, nullable=True, form="int", group=_T),
    Field("price_per_gpu_hour", "float", None, ("Цена GPU-часа в вашей валюте; null — без стоимости",
                                                "Bir GPU-soat narxi, o‘z valyutangizda; null — narxsiz",
                                                "Price of one GPU-hour in your currency; null: no cost"),
          low=0.0, high=1e6, nullable=True, form="float", group=_T),
    Field("utilization", "float", None, ("Доля пиковой плотной производительности GPU; null — умолчание sizing",
                                         "GPU zich cho‘qqi unumdorligi ulushi; null — sizing standarti",
                                         "Share of the GPU's dense peak sustained; null: sizing's default"),
          low=0.01, high=1.0, nullable=True),
    Field("expandable_segments", "bool", False, ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                                                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                                                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")),
)
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(f.group for f in FIELDS if f.group))


def doc(name: str, lang: str) -> str:
    """The one-line description of field `name` in `lang` (ru, uz or en)."""
    return BY_NAME[name].doc[LANGS.index(lang)]


def flag(name: str) -> str:
    """The CLI option of a field: --max-seq-length for max_seq_length."""
    return "--" + name.replace("_", "-")


def parse_value(name: str, text: str) -> Any:
    """The value of `--set name=text` (or a build placeholder's name=text), read by the field's type."""
    spec = BY_NAME.get(name)
    if spec is None or spec.type in ("int", "float", "bool", "object") or text.lstrip().startswith("["):
        try:
            return read_json(text, f"the value of {name}")
        except SizingError:
            return text  # a bare word: parse_config names the field that refuses it
    if text == "null":
        return None
    return text  # a str field takes the text as written: --set framework_version=0.1 is "0.1", not 0.1
